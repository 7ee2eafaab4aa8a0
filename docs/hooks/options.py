"""MkDocs hook: the options page is made from qzoo's Config schema at every build, so
it cannot drift from the code. A page holding the marker `<!-- options -->` gets one
table per group of options: the option, its default (Atari's; presets and other
environments change some, `qzoo agents` shows how), what it accepts and what it does."""

import dataclasses

MARKER = "<!-- options -->"


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def options_markdown():
    from qzoo.configuration import Config

    groups = {}
    defaults = Config(agent="dqn", env="pong")
    for field in dataclasses.fields(Config):
        if field.name in ("agent", "env") or "help" not in field.metadata:
            continue
        groups.setdefault(field.metadata["group"], []).append(field)
    lines = []
    for group, fields in groups.items():
        lines += [
            f"## {group}",
            "",
            "| option | default | accepts | what it does |",
            "|---|---|---|---|",
        ]
        for field in fields:
            default = getattr(defaults, field.name)
            default = "''" if default == "" else default
            domain = field.metadata["domain"]
            accepts = getattr(domain, "expected", "")
            lines.append(
                f"| `--{field.name.replace('_', '-')}` | `{_cell(default)}` | "
                f"{_cell(accepts)} | {_cell(field.metadata['help'])} |"
            )
        lines.append("")
    return "\n".join(lines)


def on_page_markdown(markdown, page, config, files):
    if MARKER in markdown:
        return markdown.replace(MARKER, options_markdown())
    return markdown
