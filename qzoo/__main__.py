from qzoo.cli import entry

entry()
