// Writes golden.json: tuples packed by the npm package fdb-tuple, an
// independent JavaScript implementation of FoundationDB's tuple layer, with a
// type-annotated description of every element so the Go tests can rebuild
// the exact typed tuple. Run through golden.sh (`make golden`).
//
// Element descriptions:
//   {"type":"null"}
//   {"type":"bool","value":true}
//   {"type":"int","value":"-123"}                 decimal, any size
//   {"type":"float32","bits":"c2280000"}          raw IEEE bits, big-endian
//   {"type":"float64","bits":"c045000000000000"}
//   {"type":"bytes","hex":"00ff"}
//   {"type":"string","value":"…"}                 (always valid Unicode)
//   {"type":"uuid","hex":"<32 hex digits>"}
//   {"type":"versionstamp","hex":"<24 hex digits>"}  complete only
//   {"type":"tuple","items":[…]}
//   {"type":"incomplete_versionstamp","user_version":7}  only in "versionstamped"
import { createRequire } from 'node:module'
import { readFileSync, writeFileSync } from 'node:fs'
import assert from 'node:assert/strict'

const require = createRequire(import.meta.url)
const tuple = require('fdb-tuple')
const version = require('fdb-tuple/package.json').version

const SEED = 0x5eed2024
const RANDOM_TUPLES = 420

// mulberry32: a tiny seeded PRNG, so the file is reproducible.
function prng(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
const rnd = prng(SEED)
const int = (n) => Math.floor(rnd() * n) // 0..n-1
const pick = (arr) => arr[int(arr.length)]
const randBytes = (n) => Buffer.from(Array.from({ length: n }, () => int(256)))
const randBig = (nbytes) => {
  if (nbytes === 0) return 0n
  const b = randBytes(nbytes)
  if (b[0] === 0) b[0] = 1 + int(255)
  return BigInt('0x' + b.toString('hex'))
}

// --- element description constructors
const D = {
  null: () => ({ type: 'null' }),
  bool: (v) => ({ type: 'bool', value: v }),
  int: (v) => ({ type: 'int', value: BigInt(v).toString() }),
  f32bits: (u) => ({ type: 'float32', bits: (u >>> 0).toString(16).padStart(8, '0') }),
  f32: (x) => { const b = Buffer.alloc(4); b.writeFloatBE(x); return D.f32bits(b.readUInt32BE()) },
  f64hex: (hex) => ({ type: 'float64', bits: hex.padStart(16, '0') }),
  f64: (x) => { const b = Buffer.alloc(8); b.writeDoubleBE(x); return D.f64hex(b.toString('hex')) },
  bytes: (buf) => ({ type: 'bytes', hex: Buffer.from(buf).toString('hex') }),
  str: (s) => ({ type: 'string', value: s }),
  uuid: (buf) => ({ type: 'uuid', hex: Buffer.from(buf).toString('hex') }),
  vs: (buf) => ({ type: 'versionstamp', hex: Buffer.from(buf).toString('hex') }),
  tup: (items) => ({ type: 'tuple', items }),
  ivs: (uv) => ({ type: 'incomplete_versionstamp', user_version: uv }),
}

// toJS turns a description into the value fdb-tuple packs. Where the library
// has two encoding paths for the same thing (Number vs BigInt for integers,
// plain numbers vs {type:'double'} wrappers), both are used.
function toJS(d) {
  switch (d.type) {
    case 'null': return null
    case 'bool': return d.value
    case 'int': {
      const v = BigInt(d.value)
      const safe = v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)
      return safe && rnd() < 0.7 ? Number(v) : v
    }
    case 'float32': {
      const raw = Buffer.from(d.bits, 'hex')
      const value = raw.readFloatBE()
      if (Number.isNaN(value)) return { type: 'float', value, rawEncoding: raw }
      return { type: 'float', value }
    }
    case 'float64': {
      const raw = Buffer.from(d.bits, 'hex')
      const value = raw.readDoubleBE()
      if (Number.isNaN(value)) return { type: 'double', value, rawEncoding: raw }
      // Plain numbers that are not safe integers are packed as doubles.
      if ((!Number.isSafeInteger(value) || Object.is(value, -0)) && rnd() < 0.5) return value
      return { type: 'double', value }
    }
    case 'bytes': return Buffer.from(d.hex, 'hex')
    case 'string': return d.value
    case 'uuid': return { type: 'uuid', value: Buffer.from(d.hex, 'hex') }
    case 'versionstamp': return { type: 'versionstamp', value: Buffer.from(d.hex, 'hex') }
    case 'tuple': return d.items.map(toJS)
    case 'incomplete_versionstamp': return tuple.unboundVersionstamp(d.user_version)
    default: throw new Error('unknown description type ' + d.type)
  }
}

// --- hand-picked edge cases
const edge = []
const add = (name, items) => edge.push({ name, items })

add('empty', [])
add('null', [D.null()])
add('nulls', [D.null(), D.null()])
add('true', [D.bool(true)])
add('false', [D.bool(false)])
add('spec bytes', [D.bytes(Buffer.from('foo\x00bar', 'latin1'))])
add('spec string', [D.str('FÔO\x00bar')])
add('spec nested', [D.tup([D.bytes(Buffer.from('foo\x00bar', 'latin1')), D.null(), D.tup([])])])
add('empty bytes', [D.bytes([])])
add('empty string', [D.str('')])
add('zero bytes', [D.bytes([0, 0, 0])])
add('ff bytes', [D.bytes([0xff, 0xff])])
add('zero ff bytes', [D.bytes([0x00, 0xff, 0x00, 0xff])])
add('nul string', [D.str('\u0000')])
add('emoji', [D.str('💃🏽 dance')])
add('cjk', [D.str('日本語テキスト')])
add('combining', [D.str('e\u0301 vs é')])
add('bmp edge', [D.str('\uffff\ud7ff\ue000')])
add('astral max', [D.str(String.fromCodePoint(0x10ffff))])
add('empty nested', [D.tup([])])
add('nested null', [D.tup([D.null()])])
add('nested nulls', [D.tup([D.null(), D.null()]), D.null()])
add('deep nested', [D.tup([D.tup([D.tup([D.tup([D.int(1)])])])])])
add('nested mixed', [D.tup([D.str('a'), D.tup([D.null(), D.bytes([0])]), D.int(-1)]), D.bool(true)])
for (const v of [0, 1, -1, 255, -255, 256, -256, 65535, 65536, -65536, 2 ** 31 - 1, -(2 ** 31), 2 ** 32,
  Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER]) add(`int ${v}`, [D.int(v)])
const big = [
  2n ** 53n, -(2n ** 53n), 2n ** 63n - 1n, -(2n ** 63n), 2n ** 63n, -(2n ** 63n) - 1n,
  2n ** 64n - 1n, -(2n ** 64n) + 1n, 2n ** 64n, -(2n ** 64n), 2n ** 64n + 1n, -(2n ** 64n) - 1n,
  2n ** 72n - 1n, -(2n ** 72n - 1n), 2n ** 72n, -(2n ** 72n), 10n ** 30n, -(10n ** 30n),
  2n ** 2040n - 1n, -(2n ** 2040n - 1n), 2n ** 2032n, -(2n ** 2032n),
]
for (const v of big) add(`bigint ${v < 0n ? '-' : ''}${v.toString(16).replace('-', '').length} hex digits ${v.toString(16).slice(0, 12)}`, [D.int(v)])
const f32special = [0x00000000, 0x80000000, 0x3f800000, 0xbf800000, 0x7f800000, 0xff800000, 0x7fc00000,
  0xffc00000, 0x7f800001, 0xff800001, 0x7fffffff, 0xffffffff, 0x00000001, 0x80000001, 0x7f7fffff, 0xff7fffff,
  0x00800000, 0x807fffff, 0xc2280000]
for (const u of f32special) add(`float32 bits ${u.toString(16)}`, [D.f32bits(u)])
const f64special = ['0000000000000000', '8000000000000000', '3ff0000000000000', 'bff0000000000000',
  '7ff0000000000000', 'fff0000000000000', '7ff8000000000000', 'fff8000000000000', '7ff0000000000001',
  'fff0000000000001', '7fffffffffffffff', 'ffffffffffffffff', '0000000000000001', '8000000000000001',
  '7fefffffffffffff', 'ffefffffffffffff', '0010000000000000', 'c045000000000000', '400921fb54442d18',
  '4340000000000000', 'c340000000000000', '7e37e43c8800759c']
for (const h of f64special) add(`float64 bits ${h}`, [D.f64hex(h)])
add('float32 vs float64 same value', [D.f32(1.5), D.f64(1.5)])
add('float32 rounding', [D.f32(Math.fround(0.1)), D.f64(0.1)])
add('uuid zero', [D.uuid(Buffer.alloc(16))])
add('uuid ff', [D.uuid(Buffer.alloc(16, 0xff))])
add('uuid mixed', [D.uuid(Buffer.from('0123456789abcdeffedcba9876543210', 'hex'))])
add('versionstamp zero', [D.vs(Buffer.alloc(12))])
add('versionstamp', [D.vs(Buffer.from('000000000000000100020304', 'hex'))])
add('versionstamp almost incomplete', [D.vs(Buffer.from('fffffffffffffffffffe0001', 'hex'))])
add('versionstamp max user', [D.vs(Buffer.from('0102030405060708090affff', 'hex'))])
add('queue key', [D.str('q'), D.int(1000), D.bytes(randBytes(20))])
add('every type', [D.null(), D.bytes([1, 0]), D.str('s'), D.tup([D.null()]), D.int(-5551212), D.f32(-42),
  D.f64(-42), D.bool(false), D.bool(true), D.uuid(randBytes(16)), D.vs(Buffer.from('00000000000000000001000a', 'hex'))])

// --- seeded random tuples
const codepoints = () => {
  switch (int(6)) {
    case 0: return int(0x80) // ASCII, NUL included
    case 1: return 0
    case 2: return 0x80 + int(0x780) // 2-byte UTF-8
    case 3: { const c = 0x800 + int(0xf800); return c >= 0xd800 && c <= 0xdfff ? 0x4e00 : c } // 3-byte, no surrogates
    case 4: return 0x10000 + int(0x100000) // 4-byte
    default: return 0x61 + int(26)
  }
}
function randInt() {
  switch (int(8)) {
    case 0: return D.int(int(600) - 300)
    case 1: return D.int(int(2 ** 32) - 2 ** 31)
    case 2: return D.int(Math.floor((rnd() * 2 - 1) * Number.MAX_SAFE_INTEGER))
    case 3: return D.int(randBig(1 + int(8)) * (rnd() < 0.5 ? -1n : 1n))
    case 4: return D.int(randBig(8))
    case 5: return D.int(-randBig(8))
    case 6: return D.int(randBig(9 + int(40)) * (rnd() < 0.5 ? -1n : 1n))
    default: return D.int(randBig(1 + int(255)) * (rnd() < 0.5 ? -1n : 1n))
  }
}
function randFloat32() {
  switch (int(3)) {
    case 0: return D.f32bits(int(2 ** 32))
    case 1: return D.f32bits(pick(f32special))
    default: return D.f32(Math.fround((rnd() * 2 - 1) * 10 ** (int(20) - 10)))
  }
}
function randFloat64() {
  switch (int(3)) {
    case 0: return D.f64hex(randBytes(8).toString('hex'))
    case 1: return D.f64hex(pick(f64special))
    default: return D.f64((rnd() * 2 - 1) * 10 ** (int(600) - 300))
  }
}
function randVersionstamp() {
  const b = randBytes(12)
  if (b.subarray(0, 10).every((x) => x === 0xff)) b[0] = 0
  return D.vs(b)
}
function randElem(depth) {
  switch (int(depth < 3 ? 12 : 11)) {
    case 0: return D.null()
    case 1: return D.bool(rnd() < 0.5)
    case 2: case 3: return randInt()
    case 4: return randFloat32()
    case 5: return randFloat64()
    case 6: { // bytes with plenty of 0x00 and 0xff
      const b = randBytes(int(24))
      for (let i = 0; i < b.length; i++) if (rnd() < 0.2) b[i] = pick([0x00, 0xff])
      return D.bytes(b)
    }
    case 7: return D.str(String.fromCodePoint(...Array.from({ length: int(12) }, codepoints)))
    case 8: return D.uuid(randBytes(16))
    case 9: return randVersionstamp()
    case 10: return D.int(int(3) - 1)
    default: return D.tup(randTuple(depth + 1, 4))
  }
}
function randTuple(depth, maxLen) {
  return Array.from({ length: int(maxLen + 1) }, () => randElem(depth))
}

const entries = [...edge]
for (let i = 0; i < RANDOM_TUPLES; i++) entries.push({ name: `random ${i}`, items: randTuple(0, 6) })

const tuples = entries.map(({ name, items }) => {
  const packed = tuple.pack(items.map(toJS))
  // Sanity: fdb-tuple reads its own output back to the same bytes.
  const again = tuple.pack(tuple.unpack(packed, true))
  assert.equal(again.toString('hex'), packed.toString('hex'), `fdb-tuple round trip of ${name}`)
  return { name, elements: items, packed: packed.toString('hex') }
})

// Tuples with one incomplete versionstamp, packed for SetVersionstampedKey:
// Go's PackWithVersionstamp(nil) must equal packed + 4-byte LE stamp_offset.
const versionstamped = []
const vsCases = [
  [D.ivs(0)],
  [D.ivs(0xffff)],
  [D.str('prefix'), D.ivs(7)],
  [D.ivs(1), D.int(42)],
  [D.bytes([0, 1, 0]), D.tup([D.null(), D.ivs(3)]), D.bool(true)],
]
for (let i = 0; i < 20; i++) {
  const items = randTuple(1, 3)
  items.splice(int(items.length + 1), 0, D.ivs(int(65536)))
  vsCases.push(items)
}
vsCases.forEach((items, i) => {
  const { data, stampPos } = tuple.packUnboundVersionstamp(items.map(toJS))
  versionstamped.push({ name: `versionstamped ${i}`, elements: items, packed: data.toString('hex'), stamp_offset: stampPos })
})

const out = {
  generator: `fdb-tuple@${version} (npm), tuple/testdata/golden.mjs, seed 0x${SEED.toString(16)}`,
  tuples,
  versionstamped,
}
// One entry per line keeps the file reviewable and its diffs small.
const lines = (arr) => arr.map((e) => '  ' + JSON.stringify(e)).join(',\n')
writeFileSync(new URL('./golden.json', import.meta.url),
  `{\n "generator": ${JSON.stringify(out.generator)},\n "tuples": [\n${lines(out.tuples)}\n ],\n` +
  ` "versionstamped": [\n${lines(out.versionstamped)}\n ]\n}\n`)
JSON.parse(readFileSync(new URL('./golden.json', import.meta.url), 'utf8')) // still valid JSON
console.log(`golden.json: ${tuples.length} tuples, ${versionstamped.length} versionstamped keys from fdb-tuple@${version}`)
