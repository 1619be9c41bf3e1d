// The review page's script. It calls the public JSON API with the bearer
// token kept in this tab's session storage, and inserts everything the API
// answers as text (textContent, text nodes), never as markup: documents,
// rationales and notes are untrusted.
'use strict';
(function () {
  var TOKEN_KEY = 'rulevalidator.review.token';

  function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

  // el makes an element; kids are elements or strings (made text nodes).
  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === 'class') { e.className = attrs[k]; } else { e.setAttribute(k, attrs[k]); }
    });
    (kids || []).forEach(function (k) {
      if (k !== null && k !== undefined) { e.append(typeof k === 'string' ? document.createTextNode(k) : k); }
    });
    return e;
  }

  function say(msg) { document.getElementById('status').textContent = msg; }

  function signOut() {
    sessionStorage.removeItem(TOKEN_KEY);
    window.location.assign('/review/');
  }

  // api calls the API; it answers the decoded JSON, or throws an Error
  // carrying the API's message. A refused token signs out.
  function api(path, opts) {
    opts = opts || {};
    var headers = { Authorization: 'Bearer ' + token(), Accept: opts.accept || 'application/json' };
    if (opts.body) { headers['Content-Type'] = 'application/json'; }
    return fetch(path, { method: opts.method || 'GET', headers: headers, body: opts.body, cache: 'no-store', credentials: 'omit' })
      .then(function (res) {
        if (res.status === 401 && !opts.signingIn) { signOut(); throw new Error('Your token was refused; sign in again.'); }
        if (!res.ok) {
          return res.json().catch(function () { return {}; }).then(function (b) {
            var err = new Error((b.error && b.error.message) || ('HTTP ' + res.status));
            err.status = res.status;
            throw err;
          });
        }
        return opts.blob ? res.blob() : res.json();
      });
  }

  function pct(c) { return c === null || c === undefined ? 'not measured' : Math.round(c * 100) + '%'; }

  function age(s) {
    if (s < 60) { return s + ' s'; }
    if (s < 3600) { return Math.floor(s / 60) + ' min'; }
    if (s < 86400) { return Math.floor(s / 3600) + ' h'; }
    return Math.floor(s / 86400) + ' d';
  }

  // verdictWord says a verdict (or a final outcome) in one word.
  function verdictWord(v) {
    if (v.not_applicable) { return 'not applicable'; }
    if (v.numerical_output !== null && v.numerical_output !== undefined) { return 'score ' + v.numerical_output; }
    if (v.boolean_output === true) { return 'pass'; }
    if (v.boolean_output === false) { return 'fail'; }
    return v.outcome ? v.outcome.replace('_', ' ') : 'no verdict';
  }

  function randomID() {
    var b = new Uint8Array(12);
    crypto.getRandomValues(b);
    return 'rv-' + Array.from(b, function (x) { return x.toString(16).padStart(2, '0'); }).join('');
  }

  // --- sign in ---
  function signinPage() {
    var form = document.getElementById('signin-form');
    var input = document.getElementById('token');
    input.focus();
    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      var t = input.value.trim();
      input.value = '';
      sessionStorage.setItem(TOKEN_KEY, t);
      say('Checking the token…');
      api('/v1/reviews?status=pending&limit=1', { signingIn: true }).then(function () {
        window.location.assign('/review/queue');
      }, function (err) {
        sessionStorage.removeItem(TOKEN_KEY);
        say('The API refused this token: ' + err.message);
        input.focus();
      });
    });
  }

  // --- the queue ---
  function queuePage() {
    var body = document.querySelector('#queue tbody');
    var more = document.getElementById('more');
    var cursor = '';
    function load() {
      var q = '/v1/reviews?status=pending&limit=100' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : '');
      say('Loading…');
      api(q).then(function (page) {
        page.items.forEach(function (it) {
          var href = '/review/validations/' + encodeURIComponent(it.request_id) + '#rule=' + encodeURIComponent(it.rule_id);
          body.append(el('tr', {}, [
            el('td', { class: 'num' }, [pct(it.confidence)]),
            el('td', {}, [it.ruleset_id + (it.ruleset_version ? ' ' + it.ruleset_version : '')]),
            el('td', {}, [el('a', { href: href }, [it.rule_name || it.rule_id])]),
            el('td', {}, [it.verdict.replace('_', ' ')]),
            el('td', {}, [(it.review_reasons || []).join(', ').replace(/_/g, ' ')]),
            el('td', { class: 'num' }, [age(it.age_seconds)]),
            el('td', {}, [it.request_id])
          ]));
        });
        cursor = page.next || '';
        more.hidden = !cursor;
        var n = body.children.length;
        say(n === 0 ? 'Nothing waits for review.' : n + ' verdict' + (n === 1 ? '' : 's') + ' waiting for review.');
      }, function (err) { say('The queue cannot be read: ' + err.message); });
    }
    more.addEventListener('click', load);
    load();
  }

  // --- a validation ---
  function validationPage() {
    var requestID = document.body.getAttribute('data-request-id');
    var base = '/v1/validations/' + encodeURIComponent(requestID);
    var verdicts = [];
    var selected = -1;
    var images = {}; // object URLs of page images, by doc/page/spans
    var docs = {}; // document numbers by name
    var shown = 0; // the last page asked for: an answer to an earlier ask is dropped
    var list = document.getElementById('rules');
    var detail = document.getElementById('rule-detail');
    var form = document.getElementById('review-form');
    var outcome = document.getElementById('outcome');
    var pageView = document.getElementById('page-view');

    function load(keep) {
      return api(base).then(function (b) {
        if (!b.result) { return b; }
        return api(base + '/documents').then(function (d) {
          d.documents.forEach(function (doc) { docs[doc.name] = doc.doc; });
          return b;
        });
      }).then(function (b) {
        if (!b.result) { say('Validation ' + requestID + ' is ' + b.status + '; it has no verdicts yet.'); return; }
        var s = b.result.summary;
        verdicts = b.result.verdicts;
        var fin = s.final_aggregates || {};
        document.getElementById('summary').textContent = 'Ruleset ' + s.ruleset_id + (s.ruleset_version ? ' ' + s.ruleset_version : '') +
          ' · ' + verdicts.length + ' rules · ' + (s.counts ? s.counts.needs_review : 0) + ' needing review' +
          (fin.boolean ? ' · final: ' + (fin.boolean.passed ? 'passed' : 'failed') + ' (' + fin.boolean.passed_count + ' of ' + fin.boolean.applicable + ')' : '') +
          (fin.numerical && fin.numerical.score !== null ? ' · final score ' + fin.numerical.score.toFixed(2) : '');
        list.textContent = '';
        verdicts.forEach(function (v, i) {
          var tags = [];
          if (v.review) { tags.push(el('span', { class: 'tag reviewed' }, ['reviewed'])); } else if (v.needs_review) { tags.push(el('span', { class: 'tag needs' }, ['needs review'])); }
          var btn = el('button', { type: 'button', class: 'rule', 'data-index': String(i), id: 'rule-' + i }, [
            el('span', { class: 'rule-name' }, [v.rule_name || v.rule_id]),
            el('span', { class: 'rule-meta' }, [verdictWord(v.final || v) + ' · ' + pct(v.confidence)])
          ].concat(tags));
          btn.addEventListener('click', function () { select(i); });
          list.append(el('li', {}, [btn]));
        });
        say('');
        var want = keep;
        if (want === undefined) {
          var m = /^#rule=(.+)$/.exec(window.location.hash);
          want = 0;
          if (m) {
            var id = decodeURIComponent(m[1]);
            verdicts.forEach(function (v, i) { if (v.rule_id === id) { want = i; } });
          }
        }
        if (verdicts.length) { select(want); }
      }, function (err) { say('The validation cannot be read: ' + err.message); });
    }

    function row(dl, term, value) {
      dl.append(el('dt', {}, [term]), el('dd', {}, [value]));
    }

    function select(i) {
      if (i < 0 || i >= verdicts.length) { return; }
      selected = i;
      var v = verdicts[i];
      Array.prototype.forEach.call(list.querySelectorAll('button.rule'), function (b) {
        if (b.getAttribute('data-index') === String(i)) { b.setAttribute('aria-current', 'true'); } else { b.removeAttribute('aria-current'); }
      });
      history.replaceState(null, '', '#rule=' + encodeURIComponent(v.rule_id));
      detail.textContent = '';
      detail.append(el('h3', {}, [v.rule_name || v.rule_id]), el('p', { class: 'rule-id' }, ['Rule ' + v.rule_id + ' (' + v.rule_type + ')']));
      var dl = el('dl', { class: 'facts' });
      row(dl, 'Model verdict', verdictWord(v));
      row(dl, 'Confidence', pct(v.confidence));
      if (v.needs_review) { row(dl, 'Needs review', (v.review_reasons || []).join(', ').replace(/_/g, ' ')); }
      dl.append(el('dt', {}, ['Rationale']), el('dd', { id: 'rationale' }, [v.rationale || '—']));
      if (v.problems && v.problems.length) {
        dl.append(el('dt', {}, ['Problems']), el('dd', {}, [el('ul', {}, v.problems.map(function (p) { return el('li', {}, [p]); }))]));
      }
      var final = v.final || {};
      dl.append(el('dt', {}, ['Final outcome']), el('dd', { id: 'final-outcome' }, [verdictWord(final) + (final.source === 'review' ? ' (by review)' : ' (the model\'s)')]));
      detail.append(dl);

      var evs = v.evidences || [];
      detail.append(el('h4', {}, ['Evidence']));
      if (!evs.length) { detail.append(el('p', {}, ['The verdict cites no passage.'])); }
      var ul = el('ul', { class: 'evidence' });
      evs.forEach(function (e) {
        var where = e.source_origin + (e.source_page_number ? ', page ' + e.source_page_number : '') + (e.passage_id ? ' (' + e.passage_id + ')' : '');
        var li = el('li', {}, [el('q', {}, [e.text]), ' ']);
        var ref = placeOf(e);
        if (ref) {
          var b = el('button', { type: 'button', class: 'link' }, ['Show ' + where]);
          b.addEventListener('click', function () { showPage(ref.doc, ref.page, citedOn(v, ref)); });
          li.append(b);
        } else {
          li.append(el('span', { class: 'muted' }, [where]));
        }
        if (e.altered) { li.append(' ', el('strong', {}, ['The document says something else than the model quoted.'])); }
        if (e.cited_passage_id) { li.append(' ', el('strong', {}, ['The model gave passage ' + e.cited_passage_id + '; the words it quoted stand here.'])); }
        ul.append(li);
      });
      detail.append(ul);

      detail.append(el('h4', {}, ['Review']));
      if (v.review) {
        var r = v.review;
        detail.append(el('p', { class: 'review' }, [r.decision + ' by ' + r.reviewer + ' at ' + r.reviewed_at + ': ' + verdictWord(final)]));
        if (r.note) { detail.append(el('p', { class: 'note' }, [r.note])); }
      } else {
        detail.append(el('p', {}, ['Not reviewed yet.']));
      }
      if (v.review_history && v.review_history.length > 1) {
        detail.append(el('h4', {}, ['History']), el('ol', { class: 'history' }, v.review_history.map(function (r) {
          return el('li', {}, [r.reviewed_at + ' · ' + r.reviewer + ' · ' + r.decision + (r.note ? ' · ' + r.note : '')]);
        })));
      }
      setForm(v);
      var first = null;
      evs.some(function (e) { first = placeOf(e); return first !== null; });
      if (first) { showPage(first.doc, first.page, citedOn(v, first)); } else { pageView.textContent = ''; pageView.append(el('p', {}, ['No cited page.'])); }
    }

    // placeOf is where an evidence is: its document and page, and its
    // passage id or its span (code points into the document's text); null
    // for one outside the documents.
    function placeOf(e) {
      var m = /^d(\d+)p(\d+)s\d+$/.exec(e.passage_id || '');
      if (m) { return { doc: Number(m[1]), page: Number(m[2]), id: e.passage_id }; }
      var doc = docs[e.source_origin];
      if (doc && e.source_page_number > 0 && e.start_offset !== null && e.start_offset !== undefined && e.end_offset > e.start_offset) {
        return { doc: doc, page: e.source_page_number, span: [e.start_offset, e.end_offset] };
      }
      return null;
    }

    // citedOn is what v cites on a page: passage ids and spans.
    function citedOn(v, ref) {
      var out = { ids: [], spans: [] };
      (v.evidences || []).forEach(function (e) {
        var p = placeOf(e);
        if (!p || p.doc !== ref.doc || p.page !== ref.page) { return; }
        if (p.id) { out.ids.push(p.id); } else { out.spans.push(p.span); }
      });
      return out;
    }

    function setForm(v) {
      form.hidden = false;
      outcome.textContent = '';
      if (v.rule_type === 'numerical') {
        (v.allowed_scores || []).forEach(function (s) { outcome.append(el('option', { value: 'score:' + s }, ['score ' + s])); });
      } else {
        outcome.append(el('option', { value: 'pass' }, ['pass']), el('option', { value: 'fail' }, ['fail']));
      }
      outcome.append(el('option', { value: 'na' }, ['not applicable']));
      document.getElementById('decision-confirm').checked = true;
      document.getElementById('note').value = '';
      document.getElementById('passages').value = '';
    }

    form.addEventListener('submit', function (ev) {
      ev.preventDefault();
      var v = verdicts[selected];
      var body = { review_id: randomID(), rule_id: v.rule_id, decision: form.elements.decision.value, note: document.getElementById('note').value };
      var ids = document.getElementById('passages').value.split(/[\s,]+/).filter(Boolean);
      if (ids.length) { body.passage_ids = ids; }
      if (body.decision === 'override') {
        var o = outcome.value;
        if (o === 'na') { body.not_applicable = true; } else if (o.indexOf('score:') === 0) { body.numerical_output = Number(o.slice(6)); } else { body.boolean_output = o === 'pass'; }
      }
      say('Saving the review…');
      api(base + '/reviews', { method: 'POST', body: JSON.stringify(body) }).then(function () {
        return load(selected).then(function () {
          say('Review saved. Final outcome of ' + v.rule_id + ': ' + verdictWord(verdicts[selected].final || {}) + '.');
          document.getElementById('rule-' + selected).focus();
        });
      }, function (err) { say('The review was not saved: ' + err.message); });
    });

    function showPage(doc, page, cited) {
      var path = base + '/documents/' + doc + '/pages/' + page;
      var query = cited.spans.length ? '?spans=' + cited.spans.map(function (s) { return s[0] + '-' + s[1]; }).join(',') : '';
      var ask = ++shown;
      pageView.setAttribute('aria-busy', 'true');
      api(path + query).then(function (pg) {
        if (ask !== shown) { return; }
        var parts = [el('p', { class: 'page-title' }, [pg.document + ' · page ' + pg.page + ' of ' + pg.pages])];
        var marked = pg.passages.filter(function (p) { return cited.ids.indexOf(p.id) >= 0; }).concat(pg.spans.map(function (s) {
          return { id: 'span:' + (s.start + pg.offset) + '-' + (s.end + pg.offset), start: s.start, end: s.end, boxes: s.boxes };
        }));
        var draw = function (url) {
          if (ask !== shown) { return; }
          pageView.textContent = '';
          if (url) {
            var fig = el('div', { class: 'page-image' }, [el('img', { src: url, alt: 'Page ' + pg.page + ' of ' + pg.document + ', the cited passages outlined', width: String(pg.width), height: String(pg.height) })]);
            marked.forEach(function (p) {
              p.boxes.forEach(function (b) {
                var box = el('div', { class: 'box', 'data-passage': p.id, title: p.id });
                box.style.left = (b.x * 100) + '%';
                box.style.top = (b.y * 100) + '%';
                box.style.width = (b.w * 100) + '%';
                box.style.height = (b.h * 100) + '%';
                fig.append(box);
              });
            });
            parts.push(fig);
          }
          parts.push(el('h3', { class: 'sr-only' }, ['Text of the page']), pageText(pg, marked));
          parts.forEach(function (p) { pageView.append(p); });
          pageView.removeAttribute('aria-busy');
        };
        if (!pg.image) { draw(null); return; }
        var key = doc + '/' + page + query;
        if (images[key]) { draw(images[key]); return; }
        return api(path + '.png' + query, { blob: true, accept: 'image/png' }).then(function (blob) {
          images[key] = URL.createObjectURL(blob);
          draw(images[key]);
        });
      }).catch(function (err) {
        if (ask !== shown) { return; }
        pageView.removeAttribute('aria-busy');
        pageView.textContent = '';
        pageView.append(el('p', {}, ['The page cannot be shown: ' + err.message]));
      });
    }

    // pageText is the page's text with the cited passages marked; offsets
    // are code points.
    function pageText(pg, marked) {
      var cps = Array.from(pg.text);
      var out = el('pre', { class: 'page-text' });
      var at = 0;
      marked.slice().sort(function (a, b) { return a.start - b.start; }).forEach(function (p) {
        if (p.start < at) { return; }
        out.append(cps.slice(at, p.start).join(''), el('mark', { 'data-passage': p.id }, [cps.slice(p.start, p.end).join('')]));
        at = p.end;
      });
      out.append(cps.slice(at).join(''));
      return out;
    }

    document.addEventListener('keydown', function (ev) {
      var t = ev.target;
      if (ev.ctrlKey || ev.metaKey || ev.altKey || (t && /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) { return; }
      if (ev.key === 'j' || ev.key === 'k') {
        var next = selected + (ev.key === 'j' ? 1 : -1);
        if (next >= 0 && next < verdicts.length) { select(next); document.getElementById('rule-' + next).focus(); }
      } else if (ev.key === 'c' && !form.hidden) {
        document.getElementById('decision-confirm').checked = true;
        form.querySelector('button[type=submit]').focus();
      } else if (ev.key === 'o' && !form.hidden) {
        document.getElementById('decision-override').checked = true;
        outcome.focus();
      } else {
        return;
      }
      ev.preventDefault();
    });
    outcome.addEventListener('change', function () { document.getElementById('decision-override').checked = true; });
    load();
  }

  document.addEventListener('DOMContentLoaded', function () {
    var page = document.body.getAttribute('data-page');
    document.getElementById('signout').addEventListener('click', signOut);
    if (page === 'signin') { signinPage(); return; }
    if (!token()) { window.location.assign('/review/'); return; }
    if (page === 'queue') { queuePage(); } else if (page === 'validation') { validationPage(); }
  });
}());
