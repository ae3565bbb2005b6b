"""The operator's own traffic on the controller: a trace imported and summarised (traffic.py), its plot
(traffic_plot.py), several servers' captures merged into one (merge.py). The trace format and its reading are the
host package's (host/bench/trace.py)."""
