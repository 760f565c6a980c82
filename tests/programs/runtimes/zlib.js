// A node program for the runtimes corpus: a zlib stream pipeline through files, crypto on the
// libuv thread pool, a child process, timers, a signal handler and an exit code.
const fs = require('node:fs'), zlib = require('node:zlib'), crypto = require('node:crypto');
const { pipeline } = require('node:stream/promises');
const { execFileSync } = require('node:child_process');
(async () => {
  fs.writeFileSync('in.txt', Array.from({ length: 50000 }, (_, i) => `row ${i} ${i * 7919 % 10007}`).join('\n'));
  await pipeline(fs.createReadStream('in.txt'), zlib.createGzip(), fs.createWriteStream('in.gz'));
  await pipeline(fs.createReadStream('in.gz'), zlib.createGunzip(), fs.createWriteStream('out.txt'));
  console.log('roundtrip', fs.readFileSync('out.txt').equals(fs.readFileSync('in.txt')));
  const keys = await Promise.all([1, 2, 3, 4].map(i => new Promise((ok, fail) =>
    crypto.pbkdf2('pw' + i, 'salt', 20000, 16, 'sha256', (e, k) => e ? fail(e) : ok(k.toString('hex').slice(0, 8))))));
  console.log('pbkdf2', keys.join(' '));
  console.log(execFileSync('sh', ['-c', 'seq 3 | tac']).toString().trim().split('\n').join(','));
  await new Promise(ok => { process.once('SIGUSR2', () => { console.log('usr2'); ok(); }); process.kill(process.pid, 'SIGUSR2'); });
  await new Promise(ok => setTimeout(ok, 50));
  process.exitCode = 6;
})();
