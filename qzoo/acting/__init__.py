"""Acting: environments, exploration and the policy, and how acting runs beside learning
(rlpyt's samplers). The actor and its policy (actor.py, policy.py, recurrent_policy.py),
epsilon-greedy and each environment's epsilon (exploration.py, schedule.py), the driver
interface (driver.py) and its drivers: serial and parallel (serial.py, workers.py),
alternating (alternating.py), async in a thread or a process (asynchronous.py,
process.py, prefetch.py, pinning.py) and ale-py batches (batches.py); the replay-ratio
rule and its two-way gate (ratio.py)."""
