"""Training on Ray (issue 14): Ape-X's layout (Horgan et al. 2018) with qzoo's parts.

  qzoo train AGENT --env GAME --ray [--address auto|HOST:PORT] --actors N
             [--envs-per-actor M] [--replay-shards K]

  cluster.py  connecting (a local instance with this machine's cores, or a cluster)
  workers.py  ActorWorker: qzoo's Actor over M environments with Ape-X's epsilons and
              initial priorities; EvalWorker: the evaluation actor
  shards.py   ReplayShard: qzoo's replay (FrameStorage + sampler) for the actors i of
              shard i mod K, serving batches
  trainer.py  RayTrainer: the learner (this process) and the loop that holds the
              replay ratio; a Trainer, so results rows, checkpoints and resume are
              the local run's (loop.run, rundir)
  recurrent.py  R2D1 on Ray (R2D2's layout): the recurrent actor and evaluator and the
              sequence replay shard the trainer takes for --recurrent
  dataset_shards.py, offline.py  --offline on Ray: a DQN Replay Dataset split across
              the shards (DatasetShard) and the learner that samples them
              (OfflineRayTrainer); no training actors

Ray is optional (`pip install 'qzoo[ray]'`); nothing here imports it at module level.
"""


def make_trainer(config, info=None):
    """The RayTrainer of a --ray run (OfflineRayTrainer with --offline)."""
    if config.offline:
        from qzoo.distributed.offline import OfflineRayTrainer

        return OfflineRayTrainer(config, info)
    from qzoo.distributed.trainer import RayTrainer

    return RayTrainer(config, info)
