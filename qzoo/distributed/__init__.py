"""Training on Ray: Ape-X's layout (Horgan et al. 2018) with qzoo's parts.

  qzoo train AGENT --env GAME --ray [--address auto|HOST:PORT] --actors N
             [--envs-per-actor M] [--replay-shards K]

  cluster.py  connecting (a local instance with this machine's cores, or a cluster)
  workers.py  ActorWorker (qzoo's Actor with Ape-X's epsilons and initial priorities)
              and EvalWorker (the evaluation actor)
  shards.py   ReplayShard: qzoo's replay for the actors i of shard i mod K
  driver.py   RayDriver: the learner's loop (this process), holding the replay ratio;
              a driver, so results rows, checkpoints and resume are the local run's
  recurrent.py  R2D1 on Ray (R2D2's layout): recurrent actors and sequence shards
  dataset_shards.py, offline.py  --offline on Ray: a DQN Replay Dataset split across
              the shards and the learner that samples them (OfflineRayDriver)

Ray is optional (`pip install 'qzoo[ray]'`); nothing here imports it at module level."""
