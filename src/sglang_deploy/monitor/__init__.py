"""Watching a deployed server: the Prometheus metrics each SGLang release exposes (``metrics``), the recording and
alert rules rendered for the release a host runs (``rules``) and a Grafana dashboard (``dashboard``)."""
