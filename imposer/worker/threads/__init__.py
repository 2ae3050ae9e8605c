"""Threads beside the loop: heartbeats, the sweep, the hourly rollups."""
