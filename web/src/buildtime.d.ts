// Values vite.config.ts defines at build time.
import type { components } from './api/schema.gen';

declare global {
  /** Every audit action, from api/openapi.yaml's AuditAction enum. */
  const __AUDIT_ACTIONS__: components['schemas']['AuditAction'][];
}
