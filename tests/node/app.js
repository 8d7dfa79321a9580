// tests/node/app.js: a small Node program profiled by Pyroscope's own SDK
// (@pyroscope/nodejs), pushing to the server at EMBER_URL: tests/e2e/
// pyroscope_node.sh checks that Ember then holds its functions. It burns
// CPU in emberHotLoop for RUN_MS, then stops the SDK, which flushes.
const Pyroscope = require('@pyroscope/nodejs');

Pyroscope.init({
  serverAddress: process.env.EMBER_URL,
  appName: 'nodeapp',
  tags: { env: 'test' },
  flushIntervalMs: 1000,
  wall: { samplingDurationMs: 1000 },
});
Pyroscope.start();

function emberHotLoop() {
  let x = 0;
  for (let i = 0; i < 2e6; i++) x += Math.sqrt(i);
  return x;
}

const end = Date.now() + Number(process.env.RUN_MS || 3000);
function tick() {
  emberHotLoop();
  if (Date.now() < end) {
    setImmediate(tick);
    return;
  }
  Pyroscope.stop().then(() => process.exit(0), (e) => {
    console.error(e);
    process.exit(1);
  });
}
tick();
