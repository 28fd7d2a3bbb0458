// torchmem HTML report: draws the charts from the JSON in #tm-data with the
// embedded ECharts. Every string that reaches HTML (tooltips) goes through
// esc(); labels on the canvas are plain text. Nothing is fetched.
(function () {
  'use strict';
  var DATA = JSON.parse(document.getElementById('tm-data').textContent);
  var timing = window.torchmemTiming = { start: performance.now(), finished: null, charts: {} };
  var instances = [];

  var esc = torchmemCommon.esc, fmtBytes = torchmemCommon.fmtBytes, fmtTime = torchmemCommon.fmtTime;
  window.torchmemFmtBytes = fmtBytes; // for the tests

  // binaryAxis makes a byte axis tick at a power of two (1, 2, 4… GiB)
  // so that its labels read round, for values up to maxValue.
  function binaryAxis(axis, maxValue) {
    axis.axisLabel = { formatter: fmtBytes };
    if (!(maxValue > 0)) return;
    var step = Math.pow(2, Math.ceil(Math.log2(maxValue / 6)));
    axis.interval = Math.max(step, 1);
    axis.max = Math.ceil(maxValue / axis.interval) * axis.interval;
  }

  // seriesMax is the largest value of the series, or of a horizontal mark
  // line (the device capacity) when it is no more than half again above it.
  function seriesMax(opt) {
    var m = 0, marks = 0;
    opt.series.forEach(function (s) {
      (s.data || []).forEach(function (d) {
        var v = Array.isArray(d) ? d[1] : (d !== null && typeof d === 'object' ? d.value : d);
        if (typeof v === 'number' && v > m) m = v;
      });
      ((s.markLine && s.markLine.data) || []).forEach(function (d) {
        if (typeof d.yAxis === 'number' && d.yAxis > marks) marks = d.yAxis;
      });
    });
    return marks <= 1.5 * m ? Math.max(m, marks) : m;
  }

  var safeColor = /^(#[0-9a-fA-F]{3,8}|rgba?\([0-9., ]+\))$/;
  function dot(c) {
    return '<span class="tt-dot" style="background:' + (safeColor.test(c) ? c : '#999') + '"></span>';
  }
  function row(color, name, value) {
    return '<div class="tt-row">' + dot(color) + '<span class="tt-name">' + esc(name) +
      '</span><b>' + esc(value) + '</b></div>';
  }
  // markTip covers tooltips of marks and anything without a data value.
  function markTip(p) {
    return esc(p.name || p.seriesName || '');
  }

  // decorateTimeline zips the columns into the series. The first tl.stacked
  // series are stacked here, not by ECharts (which stacks a value x axis on
  // x): each is drawn from 0 to its running total, the lowest on top.
  // bandAt names the phase span under x ("forward, step 2"), or ''.
  function bandAt(tl, x) {
    var bands = tl.bands || [];
    for (var i = 0; i < bands.length; i++) {
      if (x >= bands[i].from && x <= bands[i].to) return bands[i].label;
    }
    return '';
  }

  function decorateTimeline(tl) {
    var opt = tl.option, fx = tl.time ? fmtTime : function (v) { return '#' + v; };
    var n = tl.x.length, total = new Array(n).fill(0);
    opt.series.forEach(function (s, k) {
      if (s.name === 'phases') s.z = 1;
      if (s.name === 'marks') s.z = tl.stacked + 10;
      if (k >= tl.y.length) return;
      var col = tl.y[k], data = new Array(n);
      for (var j = 0; j < n; j++) {
        var v = col[j];
        if (k < tl.stacked) { total[j] += v; v = total[j]; }
        data[j] = [tl.x[j], v];
      }
      s.data = data;
      s.z = k < tl.stacked ? 2 + tl.stacked - k : tl.stacked + 5;
    });
    opt.xAxis[0].axisLabel = { formatter: fx, hideOverlap: true };
    if (!tl.time) opt.xAxis[0].minInterval = 1;
    binaryAxis(opt.yAxis[0], seriesMax(opt));
    opt.dataZoom[1].labelFormatter = fx;
    opt.tooltip.axisPointer = { type: 'line' };
    opt.tooltip.formatter = function (ps) {
      if (!Array.isArray(ps)) return markTip(ps);
      if (!ps.length) return '';
      var phase = bandAt(tl, ps[0].value[0]);
      var html = '<div class="tt-head">' + esc(fx(ps[0].value[0]) + (phase ? ' · ' + phase : '')) + '</div>', rows = [], others = [], alloc = null;
      // Events at the same x give a series several points: keep its last.
      var last = [];
      ps.forEach(function (p) {
        if (!last[p.seriesIndex] || p.dataIndex > last[p.seriesIndex].dataIndex) last[p.seriesIndex] = p;
      });
      last.forEach(function (p) {
        if (!p) return;
        var k = p.seriesIndex, col = tl.y[k];
        if (!col) return;
        var v = col[p.dataIndex];
        if (k < tl.stacked) {
          alloc = (alloc || 0) + v;
          if (v) rows.unshift(row(p.color, p.seriesName, fmtBytes(v)));
        } else {
          others.push(row(p.color, p.seriesName, fmtBytes(v)));
        }
      });
      if (alloc !== null) rows.push(row('#222', 'allocated', fmtBytes(alloc)));
      return html + rows.concat(others).join('');
    };
    return opt;
  }

  function decorateAxisBytes(opt, horizontal) {
    binaryAxis((horizontal ? opt.xAxis : opt.yAxis)[0], seriesMax(opt));
    opt.tooltip.formatter = function (ps) {
      if (!Array.isArray(ps)) return markTip(ps);
      if (!ps.length) return '';
      var html = '<div class="tt-head">' + esc(ps[0].name) + '</div>';
      ps.forEach(function (p) { html += row(p.color, p.seriesName, fmtBytes(p.value)); });
      return html;
    };
    return opt;
  }

  function decorateSites(opt) {
    opt.tooltip.formatter = function (p) {
      var path = (p.treePathInfo || []).slice(1).map(function (n) { return n.name; });
      if (!path.length) return markTip(p);
      return '<div class="tt-head">' + esc(path.join(' › ')) + '</div>' + row(p.color, 'bytes', fmtBytes(p.value));
    };
    opt.series[0].breadcrumb = { show: true, bottom: 0 };
    return opt;
  }

  var decorate = {
    timeline: decorateTimeline,
    categories: function (o) { return decorateAxisBytes(o, true); },
    sites: decorateSites,
    fragmentation: function (o) {
      // The request and the largest free block carry their sizes, so the
      // gap between them reads at a glance.
      o.series[0].label = { show: true, position: 'top', fontSize: 10,
        formatter: function (p) { return p.dataIndex < 2 ? fmtBytes(p.value) : ''; } };
      return decorateAxisBytes(o, false);
    }
  };

  // labelFitter draws the names on the timeline only where they fit, at
  // this width of the window and this zoom, so that no two run into each
  // other ("datzero_grad", step labels a few pixels apart): the OOM's mark
  // always; a phase's name where it fits inside its band, clear of the
  // marks and names drawn before it; a step's label (drawn along its line,
  // rotated, at the top) where it is clear of all those. What is not drawn
  // is named by the tooltip. It runs after every drawing, resize and zoom,
  // and sets the option again only on a change.
  var measure = document.createElement('canvas').getContext('2d');
  var stepLabelWidth = 14; // a rotated 10px label, left of its line, and a gap
  function labelFitter(chart, opt) {
    var kp = -1, km = -1;
    opt.series.forEach(function (s, j) {
      if (s.name === 'phases' && s.markArea) kp = j;
      if (s.name === 'marks' && s.markLine) km = j;
    });
    if (kp < 0 && km < 0) return function () {};
    var areas = kp >= 0 ? opt.series[kp].markArea.data : [], label = kp >= 0 ? opt.series[kp].markArea.label || {} : {};
    var lines = km >= 0 ? opt.series[km].markLine.data : [];
    var names = areas.map(function (pair) { return pair[0].name || ''; });
    var shown = names.slice(), drawn = lines.map(function () { return true; });
    var isOOM = function (l) { return !!(l.label && l.label.formatter === 'OOM'); };
    var isStep = function (l) { return l.xAxis !== undefined && !isOOM(l); };
    return function () {
      var grid = chart.getModel().getComponent('grid', 0);
      if (!grid || !grid.coordinateSystem) return;
      var rect = grid.coordinateSystem.getRect(), boxes = [], changed = false;
      var px = function (v) { return chart.convertToPixel({ xAxisIndex: 0 }, v); };
      var clear = function (a, b) {
        return boxes.every(function (bx) { return b <= bx[0] || a >= bx[1]; });
      };
      lines.forEach(function (l) {
        var x = px(l.xAxis);
        if (isOOM(l) && x >= rect.x && x <= rect.x + rect.width) boxes.push([x - stepLabelWidth, x + 2]);
      });
      measure.font = (label.fontSize || 12) + 'px sans-serif';
      var next = names.map(function (name, i) {
        if (!name) return '';
        var a = px(areas[i][0].xAxis), b = px(areas[i][1].xAxis);
        a = Math.max(Math.min(a, b), rect.x);
        b = Math.min(Math.max(a, b), rect.x + rect.width);
        var w = measure.measureText(name).width + 6, mid = (a + b) / 2;
        if (!(b - a >= w) || !clear(mid - w / 2, mid + w / 2)) return '';
        boxes.push([mid - w / 2, mid + w / 2]);
        return name;
      });
      var nextDrawn = lines.map(function (l) {
        if (!isStep(l)) return true;
        var x = px(l.xAxis);
        if (x < rect.x || x > rect.x + rect.width || !clear(x - stepLabelWidth, x + 2)) return false;
        boxes.push([x - stepLabelWidth, x + 2]);
        return true;
      });
      next.forEach(function (name, i) { if (name !== shown[i]) changed = true; });
      nextDrawn.forEach(function (d, i) { if (d !== drawn[i]) changed = true; });
      if (!changed) return;
      shown = next;
      drawn = nextDrawn;
      var upd = opt.series.map(function () { return {}; });
      if (kp >= 0) {
        upd[kp] = { markArea: { data: areas.map(function (pair, i) {
          return [Object.assign({}, pair[0], { name: next[i] }), pair[1]];
        }) } };
      }
      if (km >= 0) {
        upd[km] = { markLine: { data: lines.map(function (l, i) {
          return drawn[i] ? l : Object.assign({}, l, { label: Object.assign({}, l.label, { show: false }) });
        }) } };
      }
      chart.setOption({ series: upd });
    };
  }

  var refits = [];

  function initDevice(i) {
    var d = DATA.devices[i];
    if (!d || d.inited) return;
    d.inited = true;
    var els = document.querySelectorAll('#tm-d' + i + ' [data-chart]');
    Array.prototype.forEach.call(els, function (el) {
      var kind = el.getAttribute('data-chart'), c = d[kind];
      if (!c) return;
      var opt = decorate[kind](c);
      var chart = echarts.init(el, null, { renderer: 'canvas' });
      chart.on('finished', function () {
        var t = performance.now();
        if (!timing.charts[el.id]) timing.charts[el.id] = t;
        if (timing.finished === null) timing.finished = t;
      });
      chart.setOption(opt);
      instances.push(chart);
      if (kind === 'timeline') {
        var fit = labelFitter(chart, opt);
        fit();
        chart.on('datazoom', fit);
        refits.push(fit);
      }
    });
  }

  function show(i) {
    var secs = document.querySelectorAll('section.device');
    Array.prototype.forEach.call(secs, function (s) {
      s.hidden = s.getAttribute('data-device') !== String(i);
    });
    initDevice(i);
    resizeAll();
  }

  function resizeAll() {
    instances.forEach(function (c) { c.resize(); });
    refits.forEach(function (fit) { fit(); });
  }

  var sel = document.getElementById('tm-device');
  if (sel) sel.addEventListener('change', function () { show(Number(sel.value)); });
  window.addEventListener('resize', resizeAll);
  var first = document.querySelector('section.device:not([hidden])');
  if (first) show(Number(first.getAttribute('data-device')));
  // A page without charts is drawn once it is parsed.
  if (!instances.length) timing.finished = performance.now();
})();
