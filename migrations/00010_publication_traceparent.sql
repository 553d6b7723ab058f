-- The trace context of the request that queued a publication: the W3C
-- traceparent of the span it was queued in (the admin API request's
-- sluice.change.publish), when that request was traced, so that the
-- publisher's span, which runs later, links to it. NULL for none.

-- +goose Up
ALTER TABLE publications ADD COLUMN traceparent text;

-- +goose Down
ALTER TABLE publications DROP COLUMN traceparent;
