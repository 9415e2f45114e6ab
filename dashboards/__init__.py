"""Dashboards as code (docs/monitoring.md): catalogue.py says what each shows,
grafana.py writes Grafana's JSON (daemonsets/monitoring/dashboards/, `make dashboards`), snapshot.py
draws the overview from a live Prometheus (`make dashboard-snapshot`)."""
