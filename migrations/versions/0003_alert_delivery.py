"""alert sinks, detector overrides, alert delivery outbox and its attempt log

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""
from alembic import op
import sqlalchemy as sa

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('alert_sink',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=128), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('url', sa.Text(), nullable=False),
    sa.Column('secret', sa.Text(), nullable=True),
    sa.Column('rules', sa.JSON(), nullable=True),
    sa.Column('min_severity', sa.String(length=16), nullable=False),
    sa.Column('enabled', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['project.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('project_id', 'name', name='uq_alert_sink_project_name')
    )
    op.create_table('project_detector_overrides',
    sa.Column('project_id', sa.Integer(), nullable=False),
    sa.Column('overrides', sa.JSON(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['project_id'], ['project.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('project_id')
    )
    op.create_table('alert_delivery',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('alert_id', sa.Integer(), nullable=False),
    sa.Column('transition', sa.String(length=16), nullable=False),
    sa.Column('sink_key', sa.String(length=64), nullable=False),
    sa.Column('sink_id', sa.Integer(), nullable=True),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('idempotency_key', sa.String(length=64), nullable=False),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('last_status_code', sa.Integer(), nullable=True),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('delivered_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['alert_id'], ['alert.id'], ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['sink_id'], ['alert_sink.id'], ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('idempotency_key', name='uq_alert_delivery_idempotency_key')
    )
    op.create_index('ix_alert_delivery_due', 'alert_delivery', ['status', 'next_attempt_at'], unique=False)
    op.create_index('ix_alert_delivery_alert', 'alert_delivery', ['alert_id'], unique=False)
    op.create_table('alert_delivery_attempt',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('delivery_id', sa.Integer(), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('duration_ms', sa.Float(), nullable=False),
    sa.Column('status_code', sa.Integer(), nullable=True),
    sa.Column('outcome', sa.String(length=16), nullable=False),
    sa.Column('error', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['delivery_id'], ['alert_delivery.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_alert_delivery_attempt_delivery', 'alert_delivery_attempt', ['delivery_id', 'attempt'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_alert_delivery_attempt_delivery', table_name='alert_delivery_attempt')
    op.drop_table('alert_delivery_attempt')
    op.drop_index('ix_alert_delivery_alert', table_name='alert_delivery')
    op.drop_index('ix_alert_delivery_due', table_name='alert_delivery')
    op.drop_table('alert_delivery')
    op.drop_table('project_detector_overrides')
    op.drop_table('alert_sink')
