"""Outbound HTTP made on a user's behalf."""
