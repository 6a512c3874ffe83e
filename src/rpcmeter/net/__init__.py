"""Connections: TLS settings and transport, timed connects, endpoints."""
