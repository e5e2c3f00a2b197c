# The gateway's image: compiled JavaScript on Node 24, production dependencies only, run as
# the unprivileged `node` user. Configure with environment variables (see docs/configuration.md) and mount
# a config file, a data file and signing keys as needed.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: the `node` devDependency (a Node binary for machines with an older one)
# is not needed inside an image that already runs Node 24.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json tsconfig.dashboard.json ./
COPY src ./src
# The gateway into dist/, and the dashboard's script into dist/dashboard/public/js/ (it is
# never checked in: npm run build compiles it from src/dashboard/browser/).
RUN npm run build

FROM node:24-bookworm-slim
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY config ./config
# Owner API changes made on the demo data are saved in data/ (data.demoSaveFile); mount a
# volume there, or give GATEWAY_DATA_FILE a file in a writable directory of your own.
RUN mkdir -p /app/data && chown node:node /app/data
VOLUME /app/data
USER node
EXPOSE 8080
# Liveness (/healthz), not readiness: an orchestrator that restarts unhealthy containers would
# restart an instance that is draining or whose directory upstream fails, which brings nothing
# back (compose.yaml asks /readyz, to order start-up). With MANAGEMENT_PORT set, health is
# served only there.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.MANAGEMENT_PORT||process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
STOPSIGNAL SIGTERM
CMD ["node", "dist/main.js"]
