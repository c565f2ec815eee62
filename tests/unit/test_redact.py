"""What responses show of connector URLs and configurations: no userinfo, no secret-looking query
values or fields; a configuration sent back as shown keeps what is stored."""

from __future__ import annotations

from ultimate_rag.domain.redact import redact_config, redact_text, redact_url, restore_secrets


def test_urls_lose_their_userinfo_and_secret_parameters() -> None:
    assert redact_url("https://u:p%40ss@h.example:8443/x?a=1&token=abc&X-Amz-Signature=zz") == \
        "https://REDACTED@h.example:8443/x?a=1&token=REDACTED&X-Amz-Signature=REDACTED"
    assert redact_url("https://h.example/x?api_key=1&keyword=2&Password=3") == \
        "https://h.example/x?api_key=REDACTED&keyword=2&Password=REDACTED"
    for plain in ("https://h.example/x?page=2", "not a url", "http://[::1"):
        assert redact_url(plain) == plain
    assert redact_text("fetching https://u:p@h/x?sig=1: timed out") == "fetching https://REDACTED@h/x?sig=REDACTED: timed out"


def test_configurations_round_trip_without_losing_credentials() -> None:
    stored = {"urls": ["https://u:p@h/x?sig=1", "https://h/y"], "api_key": "k", "name": "n"}
    shown = redact_config(stored)
    assert shown == {"urls": ["https://REDACTED@h/x?sig=REDACTED", "https://h/y"], "api_key": "REDACTED", "name": "n"}
    assert restore_secrets(shown, stored) == stored
    changed = {"urls": [shown["urls"][0], "https://h/z"]}
    assert restore_secrets(changed, stored) == {"urls": ["https://u:p@h/x?sig=1", "https://h/z"]}
