"""Workload catalog lookup: ``get_workload("resnet18")`` or a user spec file/dict."""

from __future__ import annotations

from .specs import SpecLike, WorkloadSpec, load_workload_spec, workload_names


def get_workload(spec: SpecLike) -> WorkloadSpec:
    """A :class:`WorkloadSpec` from a catalog name, a JSON spec file, a dict or a spec."""
    return load_workload_spec(spec)


__all__ = ["get_workload", "workload_names"]
