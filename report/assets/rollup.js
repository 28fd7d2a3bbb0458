// torchmem roll-up page: draws the ranks×time heat map and the peaks of the
// ranks from the JSON in #tm-data with the embedded ECharts, and opens a
// rank's details in the table when it is clicked. Every string that reaches
// HTML (tooltips) goes through esc(). Nothing is fetched.
(function () {
  'use strict';
  var DATA = JSON.parse(document.getElementById('tm-data').textContent);
  var timing = window.torchmemTiming = { start: performance.now(), finished: null, charts: {} };
  var instances = [];

  var esc = torchmemCommon.esc, fmtBytes = torchmemCommon.fmtBytes, fmtTime = torchmemCommon.fmtTime;

  // binaryAxis makes a byte axis tick at a power of two (1, 2, 4… GiB) so
  // that its labels read round, for values up to maxValue.
  function binaryAxis(axis, maxValue) {
    axis.axisLabel = { formatter: fmtBytes };
    if (!(maxValue > 0)) return;
    var step = Math.pow(2, Math.ceil(Math.log2(maxValue / 6)));
    axis.interval = Math.max(step, 1);
    axis.max = Math.ceil(maxValue / axis.interval) * axis.interval;
  }

  var safeColor = /^(#[0-9a-fA-F]{3,8}|rgba?\([0-9., ]+\))$/;
  function row(color, name, value) {
    return '<div class="tt-row"><span class="tt-dot" style="background:' + (safeColor.test(color) ? color : '#999') +
      '"></span><span class="tt-name">' + esc(name) + '</span><b>' + esc(value) + '</b></div>';
  }

  // open shows the table line with id (and its details).
  function open(id) {
    if (!id) return;
    var tr = document.getElementById(id);
    if (!tr) return;
    Array.prototype.forEach.call(document.querySelectorAll('tr.target'), function (t) { t.classList.remove('target'); });
    tr.classList.add('target');
    var det = document.querySelector('details[data-row="' + id + '"]');
    if (det) det.open = true;
    tr.scrollIntoView({ block: 'center' });
  }

  function heatOption(h) {
    var opt = h.option, cols = h.cells.length ? h.cells[0].length : 0, labels = [], data = [];
    for (var j = 0; j < cols; j++) {
      labels.push(h.time ? fmtTime(h.span_us * j / cols) : Math.round(100 * j / cols) + '%');
    }
    h.cells.forEach(function (cells, i) {
      cells.forEach(function (v, j) { if (v >= 0) data.push([j, i, v]); });
    });
    opt.xAxis[0].data = labels;
    opt.yAxis[0].data = h.rows;
    opt.yAxis[0].axisLabel = { hideOverlap: true };
    opt.series[0].data = data;
    opt.visualMap[0].orient = 'horizontal';
    opt.visualMap[0].formatter = function (v) { return fmtBytes(v * h.unit); };
    opt.tooltip.formatter = function (p) {
      if (!p || !p.value) return '';
      var j = p.value[0], i = p.value[1];
      var when = h.time ? fmtTime(h.span_us * j / cols) + '–' + fmtTime(h.span_us * (j + 1) / cols)
        : Math.round(100 * j / cols) + '–' + Math.round(100 * (j + 1) / cols) + '% of its run';
      return '<div class="tt-head">' + esc(h.rows[i]) + '</div>' + row(p.color, when, fmtBytes(p.value[2] * h.unit));
    };
    return { opt: opt, click: function (p) { if (p && p.value) open(h.anchors[p.value[1]]); } };
  }

  var marks = { worst: '▲ ', oom: '✕ ', outlier: '● ' };
  function peaksOption(pc, cats) {
    var opt = pc.option;
    opt.xAxis[0].data = pc.labels.map(function (l, i) { return (marks[pc.flags[i]] || '') + l; });
    opt.xAxis[0].axisLabel = { hideOverlap: true };
    cats.forEach(function (c, k) { opt.series[k].data = c.values; });
    var median = opt.series[opt.series.length - 1];
    median.data = [];
    median.type = 'line';
    var m = median.markLine;
    if (m) {
      m.label = { position: 'insideEndTop', formatter: function (p) { return 'median ' + fmtBytes(p.value); } };
      m.silent = true;
    }
    binaryAxis(opt.yAxis[0], Math.max.apply(null, pc.values.concat([0])));
    opt.tooltip.formatter = function (ps) {
      if (!Array.isArray(ps) || !ps.length) return '';
      var i = ps[0].dataIndex;
      var html = '<div class="tt-head">' + esc(pc.labels[i]) + ': ' + esc(fmtBytes(pc.values[i])) + '</div>';
      ps.forEach(function (p) { if (p.value) html += row(p.color, p.seriesName, fmtBytes(p.value)); });
      return html;
    };
    return { opt: opt, click: function (p) { if (p) open(pc.anchors[p.dataIndex]); } };
  }

  function draw(id, made) {
    var el = document.getElementById(id);
    if (!el || !made) return;
    var chart = echarts.init(el, null, { renderer: 'canvas' });
    chart.on('finished', function () {
      var t = performance.now();
      if (!timing.charts[id]) timing.charts[id] = t;
      if (timing.finished === null) timing.finished = t;
    });
    chart.on('click', made.click);
    chart.setOption(made.opt);
    instances.push(chart);
  }

  if (DATA.heat) draw('tm-heat', heatOption(DATA.heat));
  if (DATA.peaks) draw('tm-peaks', peaksOption(DATA.peaks, DATA.cats || []));
  window.addEventListener('resize', function () { instances.forEach(function (c) { c.resize(); }); });
  if (!instances.length) timing.finished = performance.now();
})();
