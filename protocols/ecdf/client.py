"""Clients, querier and server processes of the multi-server ECDF service, in one import.

This module gathers the client side of :mod:`pairwise.protocols.ecdf` for
applications and scripts (``from pairwise.protocols.ecdf.client import
ECDFQuerier, ServerProcesses, upload``):

- :mod:`pairwise.protocols.ecdf.uploader`: make keys and upload them
  (:func:`upload`, :func:`send_keys`, :func:`upload_pointwise`);
- :mod:`pairwise.protocols.ecdf.querier`: releases and their
  post-processing (:class:`ECDFQuerier`);
- :mod:`pairwise.protocols.ecdf.processes`: real server processes on
  loopback (:class:`ServerProcesses`).

Security model: see those modules and :mod:`pairwise.protocols.ecdf.server`.
"""

from __future__ import annotations

from .processes import ServerProcesses
from .querier import (
    CountsRelease,
    ECDFQuerier,
    ECDFRelease,
    HLRelease,
    ROCRelease,
    roc_points,
)
from .uploader import (
    DEFAULT_PROB_BITS,
    ArraySource,
    ClientBlock,
    ClientSource,
    UploadReport,
    make_keys,
    make_series,
    scheme_for,
    send_keys,
    stored_client_ids,
    upload,
    upload_pointwise,
    upload_source,
)

__all__ = [
    "DEFAULT_PROB_BITS",
    "ArraySource",
    "ClientBlock",
    "ClientSource",
    "CountsRelease",
    "ECDFQuerier",
    "ECDFRelease",
    "HLRelease",
    "ROCRelease",
    "ServerProcesses",
    "UploadReport",
    "make_keys",
    "make_series",
    "roc_points",
    "scheme_for",
    "send_keys",
    "stored_client_ids",
    "upload",
    "upload_pointwise",
    "upload_source",
]
