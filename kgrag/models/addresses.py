"""Where a model server may be: prompts, and so the corpus, go only to this machine or a
private network, unless a spec allows a remote server (``allow_remote``)."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from kgrag.errors import KgragError

LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def host_of(url: str, where: str) -> str:
    """The host of an http(s) URL, or a ``KgragError`` saying what is wrong with it."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is no number
    except ValueError as exc:
        raise KgragError(f"{where}.server {url!r} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise KgragError(f"{where}.server {url!r} is not an http(s) URL with a host, such as "
                         "http://127.0.0.1:8080/v1")
    if parts.query or parts.fragment or parts.username:
        raise KgragError(f"{where}.server {url!r}: give the API's base URL only (no query, "
                         "fragment or user), such as http://127.0.0.1:8080/v1")
    return parts.hostname


def _is_local(address: str) -> bool:
    """Loopback or a private network; link-local addresses (cloud metadata services
    answer there) are not."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback or (ip.is_private and not ip.is_link_local)


def refuse_public(host: str, url: str, where: str, *, resolve: bool) -> None:
    """Refuse a host that is not this machine or a private network. An address or a
    name of this machine is checked at once; another name (``resolve``) when it is
    first contacted, by the addresses it resolves to."""
    if host.lower() in LOCAL_NAMES:
        return
    addresses = [host] if _is_ip(host) else None
    if addresses is None:
        if not resolve:
            return
        try:
            addresses = sorted({str(info[4][0]) for info in socket.getaddrinfo(host, None)})
        except OSError as exc:
            raise KgragError(f"{where}.server {url}: cannot resolve {host!r} ({exc})") from None
    public = [a for a in addresses if not _is_local(a)]
    if public:
        raise KgragError(
            f"{where}.server {url} is not on this machine or a private network ({host} is "
            f"{', '.join(public)}): kgrag sends prompts, and so the corpus, only to local "
            f"servers unless the spec allows this one with {where}.allow_remote: true")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def is_local_host(host: str) -> bool:
    """This machine (where a file the server names is the server's file)."""
    return host.lower() in LOCAL_NAMES or (_is_ip(host) and ipaddress.ip_address(
        host.split("%", 1)[0]).is_loopback)
