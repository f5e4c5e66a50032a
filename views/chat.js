/**
 * The chat's message box and scrolling (views/chat-page.tsx). With a keyboard and mouse, Enter sends
 * (Shift+Enter starts a new line, and an input method's Enter that completes a word sends nothing); on a
 * touch screen Enter is a new line, as in a phone's messaging apps, and Send sends. A message the edge accepted leaves the
 * box, one it refused stays to be edited. While a reply streams, the page follows its end, unless the
 * reader has scrolled up to an earlier turn; a new turn always comes into view. The server sends Send
 * turned off with each accepted turn; it comes back on here when the reply's stream closes, whatever
 * closed it (its end event, including the one a reconnect gets once the reply is over, or New chat
 * removing the reply), so a stream cut short cannot leave the chat unable to send.
 */
(() => {
  const composer = document.getElementById('composer');
  const message = document.getElementById('message');
  const turns = document.getElementById('turns');
  if (!composer || !message || !turns) return;

  const enterSends = matchMedia('(pointer: fine)');
  message.addEventListener('keydown', (event) => {
    if (event.key !== 'Enter' || event.shiftKey || event.isComposing || !enterSends.matches) return;
    event.preventDefault();
    if (!document.getElementById('chat-send')?.disabled) composer.requestSubmit();
  });
  composer.addEventListener('htmx:afterRequest', (event) => {
    if (event.detail.elt !== composer || event.detail.xhr.status >= 300) return;
    message.value = '';
    // Told as an edit, so the message's private marks go with its text (private-marks.js).
    message.dispatchEvent(new Event('input'));
  });

  turns.addEventListener('htmx:sseClose', () => {
    const send = document.getElementById('chat-send');
    if (send) send.disabled = false;
  });

  const atEnd = () => innerHeight + scrollY >= document.documentElement.scrollHeight - 48;
  const toEnd = () => scrollTo({ top: document.documentElement.scrollHeight });
  let following = true;
  addEventListener('scroll', () => (following = atEnd()), { passive: true });
  // The form's swap targets the list itself; each streamed token swaps inside a turn and bubbles up here.
  turns.addEventListener('htmx:afterSwap', (event) => {
    if (event.target === turns) following = true;
    if (following) toEnd();
  });
})();
