// torchmem pages' shared helpers, prepended to report.js and rollup.js
// (one script each, one CSP hash each): esc for every string that reaches
// HTML, fmtBytes as analysis.FormatBytes writes sizes on the Go side, fmtTime
// for microseconds.
var torchmemCommon = (function () {
  'use strict';

  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c];
    });
  }

  // fmtBytes writes sizes as analysis.FormatBytes does on the Go side (the
  // one byte formatter of every output): whole bytes below 1 KiB, else
  // three significant digits in the largest binary unit that keeps the
  // number at least 1 ("1.50 GiB", "21.7 GiB", "384 MiB").
  function fmtBytes(n) {
    n = Number(n);
    if (!isFinite(n)) return '';
    var neg = n < 0, v = Math.abs(n), units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
    if (v < 1024) return (neg ? '-' : '') + Math.round(v) + ' B';
    var s = '';
    for (var i = 0; i < units.length; i++) {
      v /= 1024;
      s = toFixedEven(v, v >= 100 ? 0 : v >= 10 ? 1 : 2);
      // 1023.7 KiB rounds to "1024": write it in the next unit instead.
      if (Number(s) >= 1024 && i + 1 < units.length) continue;
      return (neg ? '-' : '') + s + ' ' + units[i];
    }
    return (neg ? '-' : '') + s + ' EiB';
  }

  // toFixedEven is toFixed rounding a tie to the even digit, as Go's
  // strconv.FormatFloat does (8.125 → "8.12", where toFixed says "8.13").
  function toFixedEven(v, digits) {
    var scale = Math.pow(10, digits), m = v * scale, fl = Math.floor(m);
    if (m - fl === 0.5) return ((fl % 2 === 0 ? fl : fl + 1) / scale).toFixed(digits);
    return v.toFixed(digits);
  }

  function fmtTime(us) {
    if (us < 1000) return Math.round(us) + ' µs';
    if (us < 1e6) return (us / 1e3).toFixed(1) + ' ms';
    return (us / 1e6).toFixed(2) + ' s';
  }

  return { esc: esc, fmtBytes: fmtBytes, fmtTime: fmtTime };
})();
