"""Reports: model tables, summary, heat map, HTML report, conformance tables."""
