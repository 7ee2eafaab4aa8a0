"""How acting runs beside learning (rlpyt's samplers, issue 11): the drivers
(drivers.py: serial, parallel, alternating, async), environment worker processes
(workers.py), the alternating actor (alternating.py), the asynchronous actor-learner
(asynchronous.py), the replay-ratio rule and its two-way gate (ratio.py), and the
per-environment epsilons and decorrelated start (epsilon.py)."""
