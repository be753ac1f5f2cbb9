"""URI reference resolution (RFC 3986 section 5) and JSON Pointer fragments (RFC 6901).

`urllib.parse.urljoin` only resolves references for a fixed list of schemes, so `urn:` and `tag:` base
URIs (which JSON Schema allows) come out wrong; this small resolver follows the RFC for every scheme.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple
from urllib.parse import unquote

_URI_PARTS = re.compile(r"^(?:([A-Za-z][A-Za-z0-9+.\-]*):)?(?://([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$", re.S)


def _split(uri: str) -> Tuple[Optional[str], Optional[str], str, Optional[str], Optional[str]]:
    match = _URI_PARTS.match(uri)
    if match is None:  # the pattern matches every string; kept for type checkers
        return None, None, uri, None, None
    scheme, authority, path, query, fragment = match.groups()
    # The regex cannot tell "//" being absent from an empty authority; look at the text itself.
    rest = uri[len(scheme) + 1:] if scheme is not None else uri
    if authority is None and rest.startswith("//"):
        authority = ""
    return scheme, authority, path, query, fragment


def _remove_dot_segments(path: str) -> str:
    output: List[str] = []
    segments = path.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == ".":
            if last:
                output.append("")
            continue
        if segment == "..":
            if len(output) > 1 or (output and output[0] != ""):
                output.pop()
            if last:
                output.append("")
            continue
        output.append(segment)
    result = "/".join(output)
    if path.startswith("/") and not result.startswith("/"):
        result = "/" + result
    return result


def _merge(base_authority: Optional[str], base_path: str, ref_path: str) -> str:
    if base_authority is not None and base_path == "":
        return "/" + ref_path
    cut = base_path.rfind("/")
    return base_path[: cut + 1] + ref_path if cut >= 0 else ref_path


def _join(scheme, authority, path, query, fragment) -> str:
    text = ""
    if scheme is not None:
        text += scheme + ":"
    if authority is not None:
        text += "//" + authority
    text += path
    if query is not None:
        text += "?" + query
    if fragment is not None:
        text += "#" + fragment
    return text


def resolve_uri(base: str, reference: str) -> str:
    """Resolve `reference` against `base` (RFC 3986 section 5.2.2), for any scheme."""
    r_scheme, r_auth, r_path, r_query, r_frag = _split(reference)
    if r_scheme is not None:
        return _join(r_scheme, r_auth, _remove_dot_segments(r_path), r_query, r_frag)
    b_scheme, b_auth, b_path, b_query, _ = _split(base)
    if r_auth is not None:
        return _join(b_scheme, r_auth, _remove_dot_segments(r_path), r_query, r_frag)
    if r_path == "":
        query = r_query if r_query is not None else b_query
        return _join(b_scheme, b_auth, b_path, query, r_frag)
    if r_path.startswith("/"):
        path = _remove_dot_segments(r_path)
    else:
        path = _remove_dot_segments(_merge(b_auth, b_path, r_path))
    return _join(b_scheme, b_auth, path, r_query, r_frag)


def split_fragment(uri: str) -> Tuple[str, str]:
    """Split "a#b" into ("a", "b"); the fragment is still percent-encoded."""
    head, _, fragment = uri.partition("#")
    return head, fragment


def pointer_tokens(fragment: str) -> List[str]:
    """Decode a URI fragment holding a JSON Pointer ("/a~1b/0") into its reference tokens."""
    text = unquote(fragment)
    if text == "":
        return []
    return [token.replace("~1", "/").replace("~0", "~") for token in text.split("/")[1:]]
