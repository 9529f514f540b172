"""Reports: the Markdown comment / check summary and the self-contained HTML report."""
