"""Rollouts and run settings to wire-format JSON: validation and lenient conversion.

Trainers hand over numpy scalars, tensors, dataclasses and pydantic models; these
helpers turn them into the JSON the API takes, and validate rollouts against
``collapsewatch.schema.Rollout`` so that bad input is caught (and named) before a
request is sent.
"""

from __future__ import annotations

import dataclasses
import json
import math
import uuid
from collections.abc import Mapping
from datetime import date, datetime
from enum import Enum
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel, ValidationError

from collapsewatch.schema import CrossScores, Rollout
from collapsewatch.sdk._warn import logger


def prepare(item: Any, step: int) -> Any:
    """Copy a non-dict rollout into something the sender thread can validate."""
    if isinstance(item, Rollout):
        return item
    if isinstance(item, Mapping):
        return {"step": step, **item}
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        return {"step": step, **dataclasses.asdict(item)}
    return item


def encode(item: Any) -> tuple[str, bytes]:
    """Validate one rollout against the wire format; its JSON (nulls left out).

    NaN and ±Infinity are valid in the wire format (the server counts them) and are
    written as the JSON constants ``NaN``/``Infinity``, which pydantic's own JSON
    writer would turn into null.
    """
    if isinstance(item, Rollout):
        return item.rollout_id, dumps(item.model_dump(exclude_none=True))
    if isinstance(item, bytes):
        data = json.loads(item)
        if not isinstance(data, dict):
            raise TypeError(f"expected a JSON object, got {type(data).__name__}")
    elif isinstance(item, Mapping):
        data = dict(item)
    else:
        raise TypeError(f"expected a dict or collapsewatch.Rollout, got {type(item).__name__}")
    if "rollout_id" not in data:
        data["rollout_id"] = uuid.uuid4().hex
    try:
        model = Rollout.model_validate(data)
    except ValidationError as first:
        try:  # numpy arrays, tensors and the like become plain JSON values
            plain = json.loads(dumps(data))
        except (TypeError, ValueError):
            raise first from None
        model = Rollout.model_validate(plain)
    return model.rollout_id, dumps(model.model_dump(exclude_none=True))


def encode_cross(item: Any) -> bytes:
    """Validate a step's cross-score matrix; its JSON (NaN/Infinity kept as constants)."""
    if isinstance(item, CrossScores):
        return dumps(item.model_dump())
    if isinstance(item, bytes):
        item = json.loads(item)
    if not isinstance(item, Mapping):
        raise TypeError(f"expected a dict or collapsewatch.CrossScores, got {type(item).__name__}")
    try:
        model = CrossScores.model_validate(item)
    except ValidationError as first:
        try:  # numpy arrays become lists
            plain = json.loads(dumps(dict(item)))
        except (TypeError, ValueError):
            raise first from None
        model = CrossScores.model_validate(plain)
    return dumps(model.model_dump())


def dumps(value: Any) -> bytes:
    return json.dumps(
        value, default=json_default, ensure_ascii=False, separators=(",", ":")
    ).encode()


def raw_json(item: Any) -> bytes:
    if isinstance(item, BaseModel):
        return dumps(item.model_dump(exclude_none=True))
    if not isinstance(item, Mapping):
        raise TypeError(f"expected a dict or collapsewatch.Rollout, got {type(item).__name__}")
    return dumps(item)


def json_default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if hasattr(value, "tolist"):  # numpy scalars and arrays, torch tensors
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, frozenset)):
        return list(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (PurePath, Enum)):
        return str(value.value if isinstance(value, Enum) else value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def jsonable_config(config: Any) -> dict[str, Any]:
    """Trainer settings as a JSON object; what JSON cannot hold becomes a string."""
    if config is None:
        return {}
    if isinstance(config, BaseModel):
        config = config.model_dump(mode="json")
    elif dataclasses.is_dataclass(config) and not isinstance(config, type):
        config = dataclasses.asdict(config)
    elif not isinstance(config, Mapping) and hasattr(config, "__dict__"):
        config = vars(config)  # argparse.Namespace and plain objects

    def fallback(value: Any) -> Any:
        try:
            return json_default(value)
        except TypeError:
            return str(value)

    try:
        plain = _finite(json.loads(json.dumps(config, default=fallback)))
    except (TypeError, ValueError, RecursionError) as exc:
        logger.warning("collapsewatch: run config is not JSON (%s); sending it as text", exc)
        return {"value": str(config)}
    return plain if isinstance(plain, dict) else {"value": plain}


def _finite(value: Any) -> Any:
    """The run config must be strict JSON: ``inf`` (a common max_grad_norm) -> "inf"."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def field_of(item: Any, name: str) -> Any:
    if isinstance(item, Mapping):
        return item.get(name)
    return getattr(item, name, None)
