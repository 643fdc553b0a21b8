"""Workload catalog lookup: ``get_workload("resnet18")`` or a user spec file/dict."""

from __future__ import annotations

from .specs import SpecLike, WorkloadSpec, load_workload_spec, workload_names


def get_workload(spec: SpecLike) -> WorkloadSpec:
    """A workload by catalog name, spec file, dict or spec: one way in for all of them.

    Parameters
    ----------
    spec : str, Path, dict or WorkloadSpec
        A catalog name (``"resnet18"``, see :func:`workload_names`), a JSON spec file, a
        dict with the spec's fields, or a spec.

    Returns
    -------
    WorkloadSpec
        The workload's spec.

    Raises
    ------
    SpecError
        For an unknown name or a malformed spec, naming the field.
    """
    return load_workload_spec(spec)


__all__ = ["get_workload", "workload_names"]
