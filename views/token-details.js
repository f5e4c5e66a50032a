/**
 * A tap or click on a token, or on its bar in the heat line, shows that token's detail (source, router
 * score against τ, timings, a fallback's reason) in its run's detail line and marks both as selected.
 * The `title` tooltip says the same but needs a hover, which a phone does not have. The detail text is
 * the token's `data-detail`, built by the server (views/token-fragments.tsx), and is set as text, never
 * as markup. One listener on the document serves the tokens that stream in later too.
 */
document.addEventListener('click', (event) => {
  const hit = event.target instanceof Element ? event.target.closest('.run .tok[data-index], .run .heat-bar[data-index]') : null;
  const run = hit?.closest('.run');
  if (!hit || !run) return;
  const index = hit.getAttribute('data-index');
  const token = run.querySelector(`.tok[data-index="${index}"]`);
  const detail = run.querySelector('.tok-detail');
  if (!token || !detail) return;
  for (const selected of run.querySelectorAll('.selected')) selected.classList.remove('selected');
  token.classList.add('selected');
  run.querySelector(`.heat-bar[data-index="${index}"]`)?.classList.add('selected');
  detail.textContent = token.getAttribute('data-detail');
});
