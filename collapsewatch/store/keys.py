"""API keys: generated with ``secrets``, stored as SHA-256 hashes, scoped to a project.

Keys are 32 random bytes (urlsafe base64, prefixed ``cw_``), so a fast unsalted hash is
enough: there is nothing to brute-force that is cheaper than guessing the key itself.
"""

from __future__ import annotations

import hashlib
import secrets

from sqlalchemy import select
from sqlalchemy.orm import Session

from collapsewatch.store.models import ApiKey, Project

KEY_PREFIX = "cw_"


def generate_key() -> str:
    """A new random API key (``cw_`` + 43 urlsafe characters)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    """Hex SHA-256 of the key: what the database stores."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def get_or_create_project(session: Session, name: str) -> Project:
    """The project called ``name``, created if missing (flushed, not committed)."""
    project = session.scalar(select(Project).where(Project.name == name))
    if project is None:
        project = Project(name=name)
        session.add(project)
        session.flush()
    return project


def register_key(session: Session, *, project: str, key: str, name: str = "default") -> bool:
    """Store ``key`` (hashed) for ``project``; returns False if it was already registered.

    Raises:
        ValueError: the key is registered for another project.
    """
    digest = hash_key(key)
    existing = session.scalar(select(ApiKey).where(ApiKey.key_hash == digest))
    proj = get_or_create_project(session, project)
    if existing is not None:
        if existing.project_id != proj.id:
            raise ValueError("this API key is already registered for another project")
        return False
    session.add(ApiKey(project_id=proj.id, key_hash=digest, prefix=key[:8], name=name))
    session.flush()
    return True


def project_for_key(session: Session, key: str) -> Project | None:
    """The project a (non-revoked) key belongs to, or None for an unknown key."""
    row = session.execute(
        select(Project)
        .join(ApiKey, ApiKey.project_id == Project.id)
        .where(ApiKey.key_hash == hash_key(key), ApiKey.revoked_at.is_(None))
    ).scalar_one_or_none()
    return row


def has_any_key(session: Session, project: str) -> bool:
    """Whether ``project`` has at least one usable key."""
    return (
        session.scalar(
            select(ApiKey.id)
            .join(Project, Project.id == ApiKey.project_id)
            .where(Project.name == project, ApiKey.revoked_at.is_(None))
            .limit(1)
        )
        is not None
    )
