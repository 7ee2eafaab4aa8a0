"""The toolbox around training (simple_dqn's scripts): commands that read run folders."""
