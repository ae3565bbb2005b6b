"""Several hosts as the controller plans them: replicas behind the smg router (fleet: manifest, rolling-deploy order,
the status view) and host-to-host checkpoint copies (model_fanout)."""
