import { createBrowserRouter, Navigate } from 'react-router';
import { Layout } from './components/Layout';
import { LoginPage } from './features/auth/LoginPage';
import { NamespacesPage } from './features/namespaces/NamespacesPage';
import { NamespacePage } from './features/namespaces/NamespacePage';
import { ChangesPage } from './features/changes/ChangesPage';
import { ChangePage } from './features/changes/ChangePage';
import { VersionsPage } from './features/versions/VersionsPage';
import { VersionPage } from './features/versions/VersionPage';
import { prefetchVersionPage } from './features/versions/hooks';
import { queryClient } from './api/queryClient';
import { preloadEditor } from './components/code';
import { AuditPage } from './features/audit/AuditPage';
import { UsersPage } from './features/users/UsersPage';
import { TokensPage } from './features/tokens/TokensPage';
import { NotFound } from './components/NotFound';
import { Loading } from './components/Page';

// Paths as DESIGN.md names them. The draft editor is its own chunk (it
// pulls in the form and YAML code); CodeMirror loads only when a YAML or
// diff view is shown.
export const router = createBrowserRouter([
  { path: '/login', element: <LoginPage /> },
  {
    element: <Layout />,
    // A deep link to a lazy page (the draft, the fleet pages) renders this
    // while its chunk loads, instead of nothing and React Router's warning.
    hydrateFallbackElement: <Loading />,
    children: [
      { path: '/', element: <Navigate to="/namespaces" replace /> },
      { path: '/namespaces', element: <NamespacesPage /> },
      { path: '/namespaces/:ns', element: <NamespacePage /> },
      { path: '/namespaces/:ns/draft', lazy: async () => ({ Component: (await import('./features/draft/DraftPage')).DraftPage }) },
      { path: '/namespaces/:ns/changes', element: <ChangesPage /> },
      { path: '/namespaces/:ns/changes/:id', element: <ChangePage /> },
      { path: '/namespaces/:ns/versions', element: <VersionsPage /> },
      {
        path: '/namespaces/:ns/versions/:n',
        element: <VersionPage />,
        loader: ({ params, request }) => {
          const diff = new URL(request.url).searchParams.get('diff');
          preloadEditor(diff === null ? 'yaml' : 'merge');
          prefetchVersionPage(queryClient, params.ns!, Number(params.n), diff);
          return null;
        },
      },
      // The fleet pages are their own chunks: the traffic page brings the
      // canvas chart (uPlot), and none of them is needed to sign in.
      { path: '/namespaces/:ns/nodes', lazy: async () => ({ Component: (await import('./features/nodes/NodesPage')).NodesPage }) },
      { path: '/namespaces/:ns/nodes/:id', lazy: async () => ({ Component: (await import('./features/nodes/NodePage')).NodePage }) },
      { path: '/namespaces/:ns/traffic', lazy: async () => ({ Component: (await import('./features/traffic/TrafficPage')).TrafficPage }) },
      { path: '/namespaces/:ns/events', lazy: async () => ({ Component: (await import('./features/events/EventsPage')).EventsPage }) },
      { path: '/namespaces/:ns/canary', lazy: async () => ({ Component: (await import('./features/canary/CanaryPage')).CanaryPage }) },
      { path: '/audit', element: <AuditPage /> },
      { path: '/users', element: <UsersPage /> },
      { path: '/tokens', element: <TokensPage /> },
      { path: '*', element: <NotFound /> },
    ],
  },
]);
