/** @jsxImportSource hono/jsx */
/**
 * The chat page, for an edge whose pack has a chat template: the turns, then the message box at the
 * bottom of the screen with Send and a folded Settings (system prompt, mode, τ, length, temperature).
 * Under the box, Mark private keeps a selected name or number of the message from the cloud (private-marks.tsx).
 * Each message posts to /chat/turns, whose answer (the user's turn and the assistant's, streaming) is
 * appended to the turns; New chat empties them and makes the edge forget the chat.
 */
import type { ViewRouteBudget as RouteBudget } from './view-model.ts';
import { ChatIdInput, EmptyChat, SendButton } from './chat-fragments.tsx';
import type { FormDefaults } from './generate-page.tsx';
import { Layout } from './layout.tsx';
import { MarkControls, MarkedList, marksFor, PrivateDetect } from './private-marks.tsx';
import { ErrorMessage } from './run-fragments.tsx';
import { RouterAbout } from './router-about.tsx';
import { MaxNewTokensInput, ModeChoice, TemperatureInput, ThresholdSlider } from './run-settings.tsx';

export function ChatPage(props: { defaults: FormDefaults }) {
  return (
    <Layout title="Chat · Edge token router" chat>
      <section class="chat" id="chat" aria-label="Chat">
        <div class="chat-head">
          <p class="legend">
            Replies stream in token by token: <span class="tok-llm">red</span> tokens came from the cloud model, <span class="tok-fallback">underlined</span>{' '}
            ones were routed while the cloud was unreachable. Earlier turns are restored from the edge's prompt cache, not computed again.
          </p>
          <button id="new-chat" class="secondary" type="button" hx-post="/chat/reset" hx-include="#chat-id" hx-target="#turns" hx-swap="innerHTML">
            New chat
          </button>
        </div>
        <ol id="turns" class="turns" role="log" data-testid="turns">
          <EmptyChat />
        </ol>
        <form id="composer" class="composer" hx-post="/chat/turns" hx-target="#turns" hx-swap="beforeend">
          <ChatIdInput id="" />
          <ChatSettings defaults={props.defaults} />
          <div class="composer-row">
            <label for="message" class="visually-hidden">
              Message
            </label>
            <textarea id="message" name="message" rows={2} required placeholder="Message" {...marksFor('message-private')}></textarea>
            <SendButton />
          </div>
          <div class="composer-marks">
            <MarkControls id="message-private" />
            <MarkedList id="message-private" />
          </div>
        </form>
      </section>
      <script src="/assets/chat.js" defer></script>
      <script type="module" src="/assets/private-marks.js"></script>
    </Layout>
  );
}

/** What a turn is generated with, folded: most people never open it. The edge's budgets ride along unseen, as on the Generate form. */
function ChatSettings(props: { defaults: FormDefaults }) {
  const { defaults } = props;
  return (
    <details class="chat-settings" data-testid="chat-settings">
      <summary>Settings</summary>
      <div class="chat-settings-grid">
        <div class="wide">
          <label for="system">System prompt</label>
          <textarea id="system" name="system" rows={2} placeholder="none"></textarea>
        </div>
        <ModeChoice />
        <ThresholdSlider id="chat-threshold" threshold={defaults.threshold} />
        <MaxNewTokensInput id="chat-max-new-tokens" value={defaults.maxNewTokens} limit={defaults.maxNewTokensLimit} />
        <TemperatureInput id="chat-temperature" />
        <PrivateDetect kinds={defaults.privateDetectKinds} />
        <BudgetFields budget={defaults.budget} />
        <div class="wide">
          <RouterAbout router={defaults.router} />
        </div>
      </div>
    </details>
  );
}

function BudgetFields(props: { budget: RouteBudget }) {
  const fields: [string, number | undefined][] = [
    ['route_share', props.budget.routeShare],
    ['route_tokens_per_minute', props.budget.routeTokensPerMinute],
    ['route_wait_ms', props.budget.routeWaitMs],
  ];
  return <>{fields.map(([name, value]) => (value === undefined ? null : <input type="hidden" name={name} value={String(value)} />))}</>;
}

/** /chat on an edge whose pack has no chat template: why, and where the completion page is. */
export function ChatUnavailablePage(props: { problem: string }) {
  return (
    <Layout title="Chat · Edge token router">
      <ErrorMessage message={props.problem} />
      <p>
        <a href="/">Generate</a> continues a prompt with this model.
      </p>
    </Layout>
  );
}
