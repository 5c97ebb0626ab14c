"""Reading input: an app's files, its settings, YAML, sandboxed Jinja2 templates."""
