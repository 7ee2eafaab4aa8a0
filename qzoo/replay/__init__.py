"""Replay memories: deduplicated frame storage (frames.py)."""
