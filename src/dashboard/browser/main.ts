/** The dashboard's entry point (public/index.html loads it as a module). */
import { startDashboard } from './app.js';
import { PAGE_DEFS } from './pages/index.js';
import { createAuth } from './session.js';

startDashboard({ auth: createAuth(), pages: PAGE_DEFS });
