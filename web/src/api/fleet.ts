// The fleet's live-traffic shapes (stats, events, the stream's messages),
// named for the console; all generated from api/openapi.yaml.
import type { components } from './schema.gen';

type S = components['schemas'];

export type EventKind = S['EventKind'];
export type FleetEvent = S['Event'];
export type Stats = S['Stats'];
export type StatSeries = S['StatsSeries'];
export type VariantSeries = S['VariantStatsSeries'];
export type StatsTick = S['StatsTick'];
export type NodeStatsSeries = S['NodeStatsSeries'];
export type CanaryAnalysis = S['CanaryAnalysis'];
export type CanaryComparison = S['CanaryComparison'];
export type CohortFigures = S['CohortFigures'];

/** StatPoint is one step of a rule series: [unixSeconds, allowed, rejected, shed, ...more counts], counts over the step. */
export type StatPoint = number[];

/** eventKinds are every event kind, in the order the filters offer them. */
export const eventKinds: EventKind[] = ['degrade', 'breaker', 'publish', 'rollback', 'canary', 'override', 'node_joined', 'node_left', 'apply_error', 'draft'];
