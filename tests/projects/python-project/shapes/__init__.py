"""Fixture package for tests/real_servers.rs."""
