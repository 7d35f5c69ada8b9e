"""Secrets out of what the suite shows: the one function every user-facing message goes through.

A kubeconfig's server URL may carry a password (``https://user:secret@host:6443``), its user a
bearer token, a password or a client key, and a tool's output (kubeadm, the Go module proxy,
Docker) may echo any of them. The messages that embed such outside values are many and new ones
come; so they are redacted where they become what the user sees (clusters/cli.py ``run``, the
progress lines, the pytest plugin's messages and test reports), not one by one where they are
written.

It masks by shape, not by knowing the secret: a URL's userinfo, the value after a key that names
a secret (``token: ...``, ``password=...``, ``client-key-data: ...``, ``--token ...``), a
``Bearer`` credential, an ``Authorization`` header and a PEM private key. A harmless value in one
of those places is masked too; a secret in none of them is not found.
"""

from __future__ import annotations

import re

MASK = "***"

# A URL's userinfo: what comes between its scheme and an "@" (a "/" in it too: one in an
# unencoded password must not leave the rest of that password shown), unless that "@" follows a
# "/" (a Go module proxy's /@v/ path). A URL whose path holds an "@" elsewhere loses its host
# too: over-masking, never a leak. Bounded, so that text with many schemes and no "@" (a log of
# URLs) is not read once per scheme to its end: a userinfo is no longer than that.
_URL_USERINFO = re.compile(r"(?<![a-zA-Z0-9+.-])([a-zA-Z][a-zA-Z0-9+.-]*://)[^\s?#@'\"<>]{0,255}[^\s?#@'\"<>/]@")

_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:.*?-----END [A-Z0-9 ]*PRIVATE KEY-----|.*)",
                          re.DOTALL)

# An HTTP Authorization header (or a field of that name): the whole value to the end of the
# line, whatever its scheme (Bearer, Basic, ...).
_AUTHORIZATION = re.compile(r"(?i)(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*)[^\r\n'\",}]+")

_BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s'\",;]+")

# A key that names a secret: it ends in one of these words (camelCase, snake_case, kebab-case
# and dotted prefixes included: accessToken, id-token, client-secret, KUBE_PASSWORD), so
# `tokenFile` or `secretName` (a path, a name) are not taken for one.
_CREDENTIAL_KEYS = r"(?:token|password|passwd|secret|client[-_]?key[-_]?data|api[-_]?key|private[-_]?key)"
_KEY_VALUE = re.compile(
    r"(?i)((?<![\w.-])[\w.-]*?" + _CREDENTIAL_KEYS + r"[\"']?\s*[:=]\s*)"  # key, its closing quote, the separator
    r"(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s,;&'\"}\])]+)")                       # a quoted or a bare value
# A command-line flag and its value: --token abc, --password=abc
_FLAG = re.compile(r"(?i)((?<![\w-])--[\w-]*?" + _CREDENTIAL_KEYS + r"(?:\s+|=))[^\s'\"-][^\s'\"]*")


def _masked_value(match: re.Match[str]) -> str:
    value = match.group(0)[len(match.group(1)):]
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{match.group(1)}{quote}{MASK}{quote}"


def redact(text: str) -> str:
    """``text`` with every credential it shows replaced by ``***`` (see the module's docstring)."""
    text = _PRIVATE_KEY.sub(MASK, text)
    text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{MASK}@", text)
    text = _AUTHORIZATION.sub(lambda m: f"{m.group(1)}{MASK}", text)
    text = _BEARER.sub(lambda m: f"{m.group(1)}{MASK}", text)
    text = _FLAG.sub(lambda m: f"{m.group(1)}{MASK}", text)
    return _KEY_VALUE.sub(_masked_value, text)
