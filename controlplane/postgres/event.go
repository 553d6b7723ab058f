package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	sluice "github.com/sluicegw/sluice/controlplane"
)

// eventLockClass is the advisory lock class that serialises event inserts,
// so that ids commit in order (see migration 00008).
const eventLockClass = 7244

var eventPage = page{Default: 100, Max: 1000}

type eventRow struct {
	ID        int64 `gorm:"primaryKey"`
	Namespace string
	At        time.Time
	Kind      string
	Node      string
	Rule      string
	FromState string
	ToState   string
	Version   int64
	Actor     string
	Detail    *string
	DedupeKey string
}

func (eventRow) TableName() string { return "events" }

func (r *eventRow) event() *sluice.Event {
	e := &sluice.Event{ID: r.ID, Namespace: r.Namespace, At: r.At.UTC(), Kind: sluice.EventKind(r.Kind), Node: r.Node, Rule: r.Rule,
		From: r.FromState, To: r.ToState, Version: r.Version, Actor: r.Actor, Key: r.DedupeKey}
	if r.Detail != nil {
		e.Detail = json.RawMessage(*r.Detail)
	}
	return e
}

// EventService implements sluice.EventService.
type EventService struct{ db *DB }

var _ sluice.EventService = (*EventService)(nil)

// NewEventService returns the event service of db.
func NewEventService(db *DB) *EventService { return &EventService{db: db} }

// RecordEvents inserts the events whose (namespace, key) is new, in one
// transaction, and returns those with their ids.
func (s *EventService) RecordEvents(ctx context.Context, evs []*sluice.Event) ([]*sluice.Event, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	var out []*sluice.Event
	err := s.db.tx(ctx, func(tx *gorm.DB) error {
		out = out[:0]
		return s.db.insertEvents(tx, evs, func(e *sluice.Event) { out = append(out, e) })
	})
	if err != nil {
		return nil, dbErr(fmt.Errorf("recording events: %w", err))
	}
	return out, nil
}

// insertEvents inserts evs in tx under the event lock, calling added for
// each one that was new (with its ID set).
func (db *DB) insertEvents(tx *gorm.DB, evs []*sluice.Event, added func(*sluice.Event)) error {
	if err := tx.Exec("SELECT pg_advisory_xact_lock(?, 0)", eventLockClass).Error; err != nil {
		return fmt.Errorf("locking events: %w", err)
	}
	for _, e := range evs {
		if e.Namespace == "" || e.Key == "" || e.Kind == "" {
			return fmt.Errorf("event without namespace, key or kind: %+v", e)
		}
		if e.At.IsZero() {
			e.At = db.now()
		}
		var detail *string
		if len(e.Detail) > 0 {
			d := string(e.Detail)
			detail = &d
		}
		var ids []int64
		if err := tx.Raw(`INSERT INTO events (namespace, at, kind, node, rule, from_state, to_state, version, actor, detail, dedupe_key)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (namespace, dedupe_key) DO NOTHING RETURNING id`,
			e.Namespace, e.At.UTC().Truncate(time.Microsecond), string(e.Kind), e.Node, e.Rule, e.From, e.To, e.Version, e.Actor, detail, e.Key).
			Scan(&ids).Error; err != nil {
			return fmt.Errorf("inserting event %s: %w", e.Key, err)
		}
		if len(ids) == 1 {
			e.ID = ids[0]
			if added != nil {
				added(e)
			}
		}
	}
	return nil
}

// FindEvents lists events newest first, or oldest first after f.After.
func (s *EventService) FindEvents(ctx context.Context, f sluice.EventFilter) ([]*sluice.Event, int64, error) {
	size := eventPage.size(f.Limit)
	q := s.db.gorm.WithContext(ctx).Model(&eventRow{}).Where("namespace = ?", f.Namespace)
	if !f.Since.IsZero() {
		q = q.Where("at >= ?", f.Since.UTC())
	}
	if len(f.Kinds) > 0 {
		kinds := make([]string, len(f.Kinds))
		for i, k := range f.Kinds {
			kinds[i] = string(k)
		}
		q = q.Where("kind IN ?", kinds)
	}
	if f.Node != "" {
		q = q.Where("node = ?", f.Node)
	}
	if f.Rule != "" {
		q = q.Where("rule = ?", f.Rule)
	}
	if f.Before > 0 {
		q = q.Where("id < ?", f.Before)
	}
	order := "id DESC"
	if f.After > 0 {
		q, order = q.Where("id > ?", f.After), "id ASC"
	}
	var rows []eventRow
	if err := q.Order(order).Limit(size).Find(&rows).Error; err != nil {
		return nil, 0, dbErr(fmt.Errorf("listing events: %w", err))
	}
	out := make([]*sluice.Event, len(rows))
	for i := range rows {
		out[i] = rows[i].event()
	}
	next := int64(0)
	if f.After == 0 {
		next = nextCursor(len(rows), size, func() int64 { return rows[len(rows)-1].ID })
	}
	return out, next, nil
}

// EventsAfter lists every namespace's events with an id above after, oldest
// first, at most limit: what the stream's poller reads.
func (s *EventService) EventsAfter(ctx context.Context, after int64, limit int) ([]*sluice.Event, error) {
	var rows []eventRow
	if err := s.db.gorm.WithContext(ctx).Where("id > ?", after).Order("id ASC").Limit(limit).Find(&rows).Error; err != nil {
		return nil, dbErr(fmt.Errorf("reading new events: %w", err))
	}
	out := make([]*sluice.Event, len(rows))
	for i := range rows {
		out[i] = rows[i].event()
	}
	return out, nil
}

// LastEventID is the highest event id, 0 when none.
func (s *EventService) LastEventID(ctx context.Context) (int64, error) {
	var id *int64
	if err := s.db.gorm.WithContext(ctx).Raw("SELECT max(id) FROM events").Scan(&id).Error; err != nil {
		return 0, dbErr(fmt.Errorf("reading the last event id: %w", err))
	}
	if id == nil {
		return 0, nil
	}
	return *id, nil
}

// PruneEvents deletes the events older than before.
func (s *EventService) PruneEvents(ctx context.Context, before time.Time) (int64, error) {
	res := s.db.gorm.WithContext(ctx).Exec("DELETE FROM events WHERE at < ?", before.UTC())
	if res.Error != nil {
		return 0, dbErr(fmt.Errorf("pruning events: %w", res.Error))
	}
	return res.RowsAffected, nil
}

// auditEvent is the event an audit event of action makes, if any: publishes,
// rollbacks, canary start/promote/abort, overrides, scheduled
// publications cancelled when due (a publish event, to "schedule_cancelled"),
// and draft saves (a draft event whose detail carries the draft's new
// revision and ETag, so that an editor can tell its own save from
// another's). It is inserted in the
// audit's transaction, keyed by the audit event's id, so it is written
// exactly once and only if the action was.
func auditEvent(row *auditRow, a audit) *sluice.Event {
	var kind sluice.EventKind
	switch a.Action {
	case sluice.ActionChangePublish:
		kind = sluice.EventPublish
		var after struct {
			Canary     json.RawMessage `json:"canary"`
			RollbackOf *int64          `json:"rollbackOf"`
		}
		if row.After != nil && json.Unmarshal([]byte(*row.After), &after) == nil {
			if len(after.Canary) > 0 && string(after.Canary) != "null" {
				return nil // the canary.start event that follows records it
			}
			if after.RollbackOf != nil && *after.RollbackOf > 0 {
				kind = sluice.EventRollback
			}
		}
	case sluice.ActionRollbackEmergent:
		kind = sluice.EventRollback
	case sluice.ActionChangeScheduleSkip:
		kind = sluice.EventPublish // a scheduled publication cancelled when due
	case sluice.ActionCanaryStart, sluice.ActionCanaryPromote, sluice.ActionCanaryAbort:
		kind = sluice.EventCanary
	case sluice.ActionNodeOverride, sluice.ActionNodeOverrideDel:
		kind = sluice.EventOverride
	case sluice.ActionDraftUpdate, sluice.ActionDraftPutRule, sluice.ActionDraftDeleteRule, sluice.ActionDraftReset:
		kind = sluice.EventDraft
	default:
		return nil
	}
	e := &sluice.Event{Namespace: a.Namespace, At: row.At, Kind: kind, Actor: row.Actor, Key: "audit/" + strconv.FormatInt(row.ID, 10)}
	detail := map[string]any{"action": a.Action, "object": a.Object}
	// Who asked, from where: the audit event's request id and client
	// address, so the timeline answers "why" without a trip to the audit log.
	if row.RequestID != "" {
		detail["requestId"] = row.RequestID
	}
	if row.ClientAddr != "" {
		detail["clientAddr"] = row.ClientAddr
	}
	if row.After != nil {
		detail["after"] = json.RawMessage(*row.After)
	}
	if row.Before != nil && kind == sluice.EventOverride {
		detail["before"] = json.RawMessage(*row.Before)
	}
	if a.Action == sluice.ActionChangeScheduleSkip {
		e.To = "schedule_cancelled"
	}
	if kind == sluice.EventDraft {
		// The ETag as GET .../draft sends it (http.draftETag).
		detail["revision"] = a.Revision
		detail["etag"] = `"` + strconv.FormatInt(a.Revision, 10) + `"`
		if a.Action != sluice.ActionDraftUpdate {
			delete(detail, "after") // a whole rule (or the reset's summary): not needed to announce a save
		}
	}
	switch kind {
	case sluice.EventCanary:
		e.To = strings.TrimPrefix(a.Action, "canary.")
	case sluice.EventOverride:
		if i := strings.LastIndex(a.Object, "/node/"); i >= 0 {
			e.Node = a.Object[i+len("/node/"):]
		}
	}
	var after struct {
		Version int64 `json:"version"`
	}
	if row.After != nil && json.Unmarshal([]byte(*row.After), &after) == nil {
		e.Version = after.Version
	}
	if b, err := json.Marshal(detail); err == nil {
		e.Detail = b
	}
	return e
}
