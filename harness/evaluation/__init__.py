"""Scenarios, scoring, replays, transcripts: what a sample is judged by and where it is kept."""
