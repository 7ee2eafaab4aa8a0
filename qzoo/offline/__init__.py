"""Offline RL on the DQN Replay Dataset (Agarwal, Schuurmans & Norouzi 2020): its file
format (dopamine.py) and a storage that samples it by Dopamine's rules (storage.py)."""
