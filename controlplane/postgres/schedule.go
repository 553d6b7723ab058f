package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"gorm.io/gorm"

	sluice "github.com/sluicegw/sluice/controlplane"
)

// SchedulerActor is the audit actor of scheduled publications.
const SchedulerActor = "sluice"

// MaxScheduleAhead is how far ahead a publication may be scheduled.
const MaxScheduleAhead = 366 * 24 * time.Hour

// ScheduleChange has an approved change published at time at.
func (s *ChangeService) ScheduleChange(ctx context.Context, ns string, id int64, at time.Time) (*sluice.Change, error) {
	actor := sluice.ActorFromContext(ctx)
	if !actor.Role.Allows(sluice.RoleApprover) {
		return nil, sluice.Errorf(sluice.EFORBIDDEN, "only approvers and admins schedule publications")
	}
	at = at.UTC().Truncate(time.Microsecond)
	if !at.After(s.db.now()) {
		return nil, &sluice.Error{Code: sluice.EINVALID, Message: "invalid schedule",
			Fields: []apiFieldError{{Path: "at", Message: fmt.Sprintf("must be in the future (it is %s now)", s.db.now().Format(time.RFC3339))}}}
	}
	if latest := s.db.now().Add(MaxScheduleAhead); at.After(latest) {
		return nil, &sluice.Error{Code: sluice.EINVALID, Message: "invalid schedule",
			Fields: []apiFieldError{{Path: "at", Message: fmt.Sprintf("must be within a year (no later than %s)", latest.Format(time.RFC3339))}}}
	}
	err := s.db.tx(ctx, func(tx *gorm.DB) error {
		r, err := lockChange(tx, ns, id)
		if err != nil {
			return err
		}
		c := r.change()
		switch {
		case c.State != sluice.ChangeApproved:
			return sluice.Errorf(sluice.ECONFLICT, "change %d is %s; only an approved change can be scheduled", id, c.State)
		case c.Stale:
			return sluice.Errorf(sluice.ECONFLICT, "change %d is stale: it was based on version %d but version %d is newer; reopen it", id, r.BaseVersion, r.Latest)
		}
		if err := tx.Exec("UPDATE changes SET publish_at = ?, scheduled_by = ?, updated_at = ? WHERE id = ?", at, actor.Name(), s.db.now(), id).Error; err != nil {
			return err
		}
		return s.db.appendAudit(ctx, tx, audit{Action: sluice.ActionChangeSchedule, Object: changeObject(ns, id), Namespace: ns,
			Before: map[string]any{"publishAt": r.PublishAt}, After: map[string]any{"publishAt": at}})
	})
	if err != nil {
		return nil, fmt.Errorf("scheduling change: %w", err)
	}
	return s.FindChangeByID(ctx, ns, id)
}

// UnscheduleChange cancels a change's schedule.
func (s *ChangeService) UnscheduleChange(ctx context.Context, ns string, id int64) (*sluice.Change, error) {
	actor := sluice.ActorFromContext(ctx)
	if !actor.Role.Allows(sluice.RoleApprover) {
		return nil, sluice.Errorf(sluice.EFORBIDDEN, "only approvers and admins cancel scheduled publications")
	}
	err := s.db.tx(ctx, func(tx *gorm.DB) error {
		r, err := lockChange(tx, ns, id)
		if err != nil {
			return err
		}
		if r.State != string(sluice.ChangeApproved) || r.PublishAt == nil {
			return sluice.Errorf(sluice.ECONFLICT, "change %d is not scheduled", id)
		}
		if err := tx.Exec("UPDATE changes SET publish_at = NULL, scheduled_by = NULL, updated_at = ? WHERE id = ?", s.db.now(), id).Error; err != nil {
			return err
		}
		return s.db.appendAudit(ctx, tx, audit{Action: sluice.ActionChangeUnschedule, Object: changeObject(ns, id), Namespace: ns,
			Before: map[string]any{"publishAt": r.PublishAt.UTC(), "scheduledBy": r.ScheduledBy}, After: map[string]any{"publishAt": nil}})
	})
	if err != nil {
		return nil, fmt.Errorf("unscheduling change: %w", err)
	}
	return s.FindChangeByID(ctx, ns, id)
}

// PublishDue publishes every approved change whose time has come (by the
// DB's clock), each in its own transaction, and returns the versions it
// created. Any number of replicas may call it at once: a change is locked
// with its namespace and checked again, so it is published exactly once. A
// due change is checked again when due: one whose scheduler no longer
// exists, is disabled or no longer holds approver rights, one that is stale
// (its base is no longer the newest version) or one that meets an active
// canary is not published: its schedule is cancelled, audited
// (change.schedule_skip, actor SchedulerActor, with the reason) and raised
// as a publish event. What is published is the change's document, as
// approved, never the draft. The actor is SchedulerActor; the audit
// records the approver who scheduled it.
func (s *ChangeService) PublishDue(ctx context.Context) ([]*sluice.Version, error) {
	now := s.db.now()
	type due struct {
		Namespace string
		ID        int64
	}
	var rows []due
	if err := s.db.gorm.WithContext(ctx).Raw("SELECT namespace, id FROM changes WHERE state = 'approved' AND publish_at <= ? ORDER BY publish_at, id LIMIT 100", now).
		Scan(&rows).Error; err != nil {
		return nil, dbErr(fmt.Errorf("finding due changes: %w", err))
	}
	ctx = sluice.NewContextWithActor(ctx, sluice.Actor{User: &sluice.User{Username: SchedulerActor, Role: sluice.RoleAdmin}, Role: sluice.RoleAdmin})
	var out []*sluice.Version
	for _, d := range rows {
		v, err := s.publishDue(ctx, d.Namespace, d.ID, now)
		if err != nil {
			return out, fmt.Errorf("publishing scheduled change %d of %s: %w", d.ID, d.Namespace, err)
		}
		if v != nil {
			out = append(out, v)
		}
	}
	return out, nil
}

// schedulerRights says why the user who scheduled a change may no longer
// have it published ("" when they may): they must still exist, be enabled
// and hold approver rights (or admin) when it is due.
func schedulerRights(tx *gorm.DB, scheduledBy *string) (string, error) {
	if scheduledBy == nil || *scheduledBy == "" {
		return "nobody is recorded as having scheduled it", nil
	}
	var rows []struct {
		Role     string
		Disabled bool
	}
	if err := tx.Raw("SELECT role, disabled FROM users WHERE lower(username) = lower(?)", *scheduledBy).Scan(&rows).Error; err != nil {
		return "", fmt.Errorf("finding the scheduler: %w", err)
	}
	switch {
	case len(rows) == 0:
		return fmt.Sprintf("%s, who scheduled it, no longer exists", *scheduledBy), nil
	case rows[0].Disabled:
		return fmt.Sprintf("%s, who scheduled it, is disabled", *scheduledBy), nil
	case !sluice.Role(rows[0].Role).Allows(sluice.RoleApprover):
		return fmt.Sprintf("%s, who scheduled it, is now %s and no longer holds approver rights", *scheduledBy, rows[0].Role), nil
	}
	return "", nil
}

func (s *ChangeService) publishDue(ctx context.Context, ns string, id int64, now time.Time) (*sluice.Version, error) {
	var v *sluice.Version
	err := s.db.tx(ctx, func(tx *gorm.DB) error {
		var err error
		v, err = s.db.publishLocked(ctx, tx, ns, id, nil, func(r *changeRow) (bool, error) {
			if r.State != string(sluice.ChangeApproved) || r.PublishAt == nil || r.PublishAt.After(now) {
				return false, nil // published, cancelled or moved by someone else
			}
			reason, err := schedulerRights(tx, r.ScheduledBy)
			if err != nil {
				return false, err
			}
			if reason == "" && r.change().Stale {
				reason = fmt.Sprintf("stale: based on version %d but version %d is newer", r.BaseVersion, r.Latest)
			}
			if reason == "" {
				active, err := activeCanary(tx, ns)
				if err != nil {
					return false, err
				}
				if active != nil {
					reason = fmt.Sprintf("version %d is in canary", active.Version)
				}
			}
			if reason == "" {
				return true, nil
			}
			if err := tx.Exec("UPDATE changes SET publish_at = NULL, scheduled_by = NULL, updated_at = ? WHERE id = ?", s.db.now(), id).Error; err != nil {
				return false, err
			}
			return false, s.db.appendAudit(ctx, tx, audit{Action: sluice.ActionChangeScheduleSkip, Object: changeObject(ns, id), Namespace: ns,
				Before: map[string]any{"publishAt": r.PublishAt.UTC(), "scheduledBy": r.ScheduledBy}, After: map[string]any{"publishAt": nil, "reason": reason}})
		})
		return err
	})
	if err != nil {
		return nil, err
	}
	if v != nil {
		s.db.published(ns)
	}
	return v, nil
}

// Scheduler calls PublishDue every Interval until closed.
type Scheduler struct {
	changes  *ChangeService
	interval time.Duration
	logger   *slog.Logger
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// NewScheduler returns a scheduler of changes polling every interval (zero
// means one second), not started.
func NewScheduler(changes *ChangeService, interval time.Duration, logger *slog.Logger) *Scheduler {
	if interval <= 0 {
		interval = time.Second
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Scheduler{changes: changes, interval: interval, logger: logger, cancel: func() {}}
}

// Start runs the loop until ctx ends or Close.
func (s *Scheduler) Start(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(s.interval)
		defer t.Stop()
		for {
			vs, err := s.changes.PublishDue(ctx)
			if err != nil && ctx.Err() == nil {
				s.logger.Error("scheduled publish", "err", err)
			}
			for _, v := range vs {
				s.logger.Info("scheduled change published", "namespace", v.Namespace, "version", v.Number)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}

// Close stops the loop and waits for it.
func (s *Scheduler) Close() {
	s.cancel()
	s.wg.Wait()
}
