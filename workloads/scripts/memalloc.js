// memalloc.js: a node workload that allocates heavily (issue 15's real programs): Buffers of
// 1 KiB to 16 MiB made, filled, concatenated and dropped, many small objects in Maps and
// arrays, a big JSON round trip; prints a digest of everything computed, so runs can be
// compared byte for byte. node memalloc.js ROUNDS
'use strict';
const crypto = require('crypto');

const rounds = Number(process.argv[2] || 40);
const digest = crypto.createHash('sha256');
for (let r = 0; r < rounds; r++) {
  // Large buffers: outside V8's heap, each one a malloc (an mmap above glibc's threshold).
  const blocks = [];
  for (let k = 10; k < 25; k++) blocks.push(Buffer.alloc(1 << k, (r + k) & 0xff));
  const joined = Buffer.concat(blocks);
  digest.update(crypto.createHash('sha256').update(joined).digest());
  // Many small objects: the V8 heap grows and is collected.
  const table = new Map();
  for (let i = 0; i < 20000; i++) {
    const row = [];
    for (let j = 0; j < 20; j++) row.push(String(i * j));
    table.set(`k${r}-${i}`, row);
  }
  const text = JSON.stringify(Object.fromEntries([...table.entries()].sort()));
  digest.update(crypto.createHash('sha256').update(text).digest());
  digest.update(String(Object.keys(JSON.parse(text)).length));
}
console.log(digest.digest('hex'));
