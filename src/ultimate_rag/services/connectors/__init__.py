"""Connectors (SPEC §9): sources per kind (urls, sitemap, s3, directory), the sync of one connector,
and the runner that claims syncs inside worker processes."""
