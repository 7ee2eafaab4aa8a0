"""Training on Ray (issue 14): Ape-X's layout (Horgan et al. 2018) with qzoo's parts.

  qzoo train AGENT --env GAME --ray [--address auto|HOST:PORT] --actors N
             [--envs-per-actor M] [--replay-shards K]

  cluster.py  connecting (a local instance with this machine's cores, or a cluster)
  workers.py  ActorWorker: qzoo's Actor over M environments with Ape-X's epsilons and
              initial priorities; EvalWorker: the evaluation actor
  shards.py   ReplayShard: qzoo's replay (FrameStorage + sampler) for the actors i of
              shard i mod K, serving batches
  driver.py   RayDriver: the learner's loop (this process) that holds the replay
              ratio; a driver, so results rows, checkpoints and resume are the local
              run's (run/trainer.py, rundir)
  recurrent.py  R2D1 on Ray (R2D2's layout): the recurrent actor and evaluator and the
              sequence replay shard the trainer takes for --recurrent
  dataset_shards.py, offline.py  --offline on Ray: a DQN Replay Dataset split across
              the shards (DatasetShard) and the learner that samples them
              (OfflineRayDriver); no training actors

Ray is optional (`pip install 'qzoo[ray]'`); nothing here imports it at module level.
"""
