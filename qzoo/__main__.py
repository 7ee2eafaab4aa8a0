from qzoo.cli.main import entry

entry()
